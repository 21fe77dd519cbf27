"""OS layer: the security boundary around one worker process.

Layers, each applied where the kernel and our privileges allow, every one of them on its own enough to stop
what it covers, so a bug in one is not a way out:

- an empty root: the worker is chrooted into a directory it has already deleted, so no path names anything;
- no privileges: every capability dropped (bounding, ambient, effective, permitted, inheritable) and, when it
  ran as root, uid and gid 65534 (nobody) with no supplementary groups;
- Landlock: no file system access at all, no TCP bind or connect, no abstract unix socket or signal outside
  the worker's own domain (not even to its zygote or a sibling);
- rlimits: memory, CPU time, no file size, no new process, no core dump;
- a seccomp allow-list (sandbox/host/_seccomp.py, compiled on the host): everything a finished, fully imported
  interpreter needs to compute and to talk over its channel; every other system call fails with EPERM, so
  Python code sees a clean PermissionError rather than a dead process. That denies, among others, every path
  lookup (open, stat, access, readlink, statx), sockets, exec, fork/clone, ptrace, process_vm_*, mount,
  unshare, setuid, setrlimit and every signal.

The namespaces (pid, net, ipc, uts, and user when not root) are the zygote's, made once for all its workers.
So are the layers a fork inherits and the zygote needs no more once it is set up (`confine_fork_server`: the
empty root, no new privileges, Landlock, the capability bounding and ambient sets): every worker starts inside
them, and a worker pays only for what is its own (`confine`).
"""

from __future__ import annotations

import ctypes
import math
import os
import resource
import signal
from typing import NamedTuple

__all__ = [
    "Confinement",
    "SeccompFilter",
    "close_other_fds",
    "confine",
    "confine_fork_server",
    "drop_bounding_set",
    "drop_privileges",
    "enter_empty_root",
    "landlock_abi",
    "make_empty_root",
    "restrict_with_landlock",
    "set_limits",
    "set_parent_death_signal",
]

_PR_SET_PDEATHSIG = 1
_PR_CAPBSET_READ = 23
_PR_CAPBSET_DROP = 24
_PR_SET_NO_NEW_PRIVS = 38
_PR_SET_SECCOMP = 22
_PR_CAP_AMBIENT = 47
_PR_CAP_AMBIENT_CLEAR_ALL = 4
_SECCOMP_MODE_FILTER = 2
_BPF_INSTRUCTION_SIZE = 8
_LINUX_CAPABILITY_VERSION_3 = 0x20080522
_NOBODY = 65534
_SYS_LANDLOCK_CREATE_RULESET = 444
_SYS_LANDLOCK_RESTRICT_SELF = 446
_LANDLOCK_CREATE_RULESET_VERSION = 1
_libc = ctypes.CDLL(None, use_errno=True)


def _check(result: int, what: str) -> None:
    if result < 0:
        raise OSError(ctypes.get_errno(), f"{what} failed: {os.strerror(ctypes.get_errno())}")


def set_parent_death_signal(parent_pid: int) -> None:
    """Die with the parent: the kernel sends SIGKILL when it goes, and a parent already gone is caught.

    A parent outside our pid namespace shows as pid 0; its going is then seen on the control socket."""
    _check(_libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0), "prctl(PR_SET_PDEATHSIG)")
    if os.getppid() not in (parent_pid, 0):
        os._exit(1)


class _SockFprog(ctypes.Structure):
    _fields_ = (("len", ctypes.c_ushort), ("filter", ctypes.c_void_p))


class SeccompFilter:
    """A BPF program as prctl reads it, made once in the fork-server: each worker that loads it then makes no
    ctypes array type (a new class per program length) and copies nothing."""

    def __init__(self, program: bytes) -> None:
        self._instructions = ctypes.create_string_buffer(program, len(program))
        self._fprog = _SockFprog(len(program) // _BPF_INSTRUCTION_SIZE, ctypes.addressof(self._instructions))
        self._argument = ctypes.byref(self._fprog)

    def load(self) -> None:
        _check(_libc.prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, self._argument, 0, 0), "prctl(PR_SET_SECCOMP)")


def set_limits(memory_mb: int, cpu_seconds: float, max_fd: int) -> None:
    """Cap the worker; soft and hard alike, so it cannot raise them back (and seccomp stops root doing so)."""
    used = resource.getrusage(resource.RUSAGE_SELF)
    cpu = math.ceil(used.ru_utime + used.ru_stime + cpu_seconds)
    limits = {
        resource.RLIMIT_AS: memory_mb * 1024 * 1024,
        # SIGXCPU at the soft limit, SIGKILL a second later should the snippet ignore it.
        resource.RLIMIT_CPU: (cpu, cpu + 1),
        resource.RLIMIT_FSIZE: 0,
        resource.RLIMIT_NOFILE: max_fd + 1,
        resource.RLIMIT_CORE: 0,
        resource.RLIMIT_NPROC: 0,
        resource.RLIMIT_MEMLOCK: 0,
    }
    for which, value in limits.items():
        soft, hard = value if isinstance(value, tuple) else (value, value)
        resource.setrlimit(which, (soft, hard))


def close_other_fds(keep: tuple[int, ...]) -> None:
    """Leave only the channel (and stdio, which point at /dev/null or the pipes' far ends)."""
    highest = 2
    for fd in sorted(keep):
        os.closerange(highest + 1, fd)
        highest = fd
    os.closerange(highest + 1, resource.getrlimit(resource.RLIMIT_NOFILE)[0])


def _new_folder(name: str) -> str:
    """A new private folder `name` in the first temporary folder that takes it (tempfile's order)."""
    places = [os.environ.get(key) for key in ("TMPDIR", "TEMP", "TMP")] + ["/tmp", "/var/tmp", "/usr/tmp", os.getcwd()]
    for place in filter(None, places):
        directory = os.path.join(place, name)
        try:
            os.mkdir(directory, 0o700)
        except OSError:
            continue
        return directory
    raise OSError(f"no temporary folder takes a new folder (tried {', '.join(filter(None, places))})")


def make_empty_root() -> int:
    """A descriptor of a fresh directory that is already deleted: nothing can ever be created in it, nothing is
    left behind, and every path looked up from it names nothing (ENOENT, whether or not it exists outside)."""
    # Not tempfile.mkdtemp: tempfile imports shutil, which loads zlib, bz2 and lzma with their libraries, and
    # each mapping of the fork-server costs every fork and every exit (about 3 us per mapping, measured).
    directory = _new_folder(f"onetool-sandbox-{os.urandom(8).hex()}")
    try:
        return os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    finally:
        os.rmdir(directory)


def enter_empty_root(directory: int) -> None:
    """Make the empty directory our working directory and `/`. Without the right to chroot (no user
    namespace for an unprivileged gateway) only the former; seccomp denies path lookups anyway."""
    os.fchdir(directory)
    _libc.chroot(b".")


def drop_bounding_set() -> None:
    """No capability can ever come back through exec: empty the bounding and ambient sets, which every fork
    inherits. Effective and permitted stay (workers still need them to become nobody); each refusal is skipped."""
    cap = 0
    while _libc.prctl(_PR_CAPBSET_READ, cap, 0, 0, 0) >= 0:  # EINVAL past the last capability this kernel knows
        _libc.prctl(_PR_CAPBSET_DROP, cap, 0, 0, 0)
        cap += 1
    _libc.prctl(_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)


_NO_CAPABILITIES = ((ctypes.c_uint32 * 2)(_LINUX_CAPABILITY_VERSION_3, 0), (ctypes.c_uint32 * 6)())
"""capset's header and data for no capability at all; made once, so a worker allocates nothing to drop them."""
_capset = _libc.capset
"""Looked up once: each first lookup of a libc function makes a ctypes function object."""


def drop_privileges() -> None:
    """Give up every capability left for good and, as root, become nobody; each step the platform refuses is
    skipped (an unprivileged worker has nothing to drop). The bounding set is already empty (`drop_bounding_set`)."""
    if os.geteuid() == 0:
        try:
            os.setgroups([])
            os.setresgid(_NOBODY, _NOBODY, _NOBODY)
            # Leaving uid 0 for good clears the effective and permitted sets.
            os.setresuid(_NOBODY, _NOBODY, _NOBODY)
        except OSError:
            pass  # a user namespace that does not map nobody: stay its root, without capabilities
    _capset(*_NO_CAPABILITIES)


class _LandlockRuleset(ctypes.Structure):
    _fields_ = (("fs", ctypes.c_uint64), ("net", ctypes.c_uint64), ("scoped", ctypes.c_uint64))


def landlock_abi() -> int:
    """The Landlock ABI version this kernel offers; 0 without Landlock."""
    abi: int = _libc.syscall(_SYS_LANDLOCK_CREATE_RULESET, None, 0, _LANDLOCK_CREATE_RULESET_VERSION)
    return max(0, abi)


def _landlock_ruleset(abi: int, *, scopes_only: bool) -> int:
    """A ruleset that handles every access right the ABI can restrict (or only its scopes) and grants none."""
    fs_rights = {1: 13, 2: 14, 3: 15, 4: 15}.get(abi, 16)  # REFER (2), TRUNCATE (3), IOCTL_DEV (5) added
    ruleset = _LandlockRuleset() if scopes_only else _LandlockRuleset(fs=(1 << fs_rights) - 1)
    size = 8
    if abi >= 4:
        ruleset.net, size = (0 if scopes_only else 0b11), 16  # BIND_TCP, CONNECT_TCP
    if abi >= 6:
        ruleset.scoped, size = 0b11, 24  # ABSTRACT_UNIX_SOCKET, SIGNAL
    fd: int = _libc.syscall(_SYS_LANDLOCK_CREATE_RULESET, ctypes.byref(ruleset), size, 0)
    _check(fd, "landlock_create_ruleset")
    return fd


def _enforce_landlock(ruleset: int) -> None:
    _check(_libc.syscall(_SYS_LANDLOCK_RESTRICT_SELF, ruleset, 0), "landlock_restrict_self")


def restrict_with_landlock(abi: int) -> None:
    """No file, no TCP, no signal or abstract socket out of this domain; nothing without Landlock."""
    if abi < 1:
        return
    ruleset = _landlock_ruleset(abi, scopes_only=False)
    try:
        _enforce_landlock(ruleset)
    finally:
        os.close(ruleset)


class Confinement(NamedTuple):
    """What the fork-server prepares once and every worker it forks confines itself with."""

    seccomp: SeccompFilter
    """The seccomp program the host compiled."""
    scopes: int
    """A Landlock ruleset of scopes only, for each worker to enter a domain of its own: the fork-server's domain
    holds every worker, and scopes stop signals and abstract sockets only at a domain's edge. -1 without
    scopes (Landlock ABI below 6)."""


def confine_fork_server(program: bytes) -> Confinement:
    """Apply, once, the layers every fork inherits; the fork-server itself needs no path, exec, TCP or signal
    out of its domain after this. The one place it is done: the tests' confined runner calls it too."""
    directory = make_empty_root()
    try:
        enter_empty_root(directory)
    finally:
        os.close(directory)
    # A write past RLIMIT_FSIZE should fail with EFBIG, not kill the worker.
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    # No exec could gain privileges again; it also lets an unprivileged process use Landlock and seccomp.
    _check(_libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl(PR_SET_NO_NEW_PRIVS)")
    abi = landlock_abi()
    restrict_with_landlock(abi)
    drop_bounding_set()
    return Confinement(SeccompFilter(program), _landlock_ruleset(abi, scopes_only=True) if abi >= 6 else -1)


def confine(
    confinement: Confinement, memory_mb: int, cpu_seconds: float, keep_fds: tuple[int, ...], parent_pid: int
) -> None:
    """Irreversibly shut a worker forked by a confined fork-server in; nothing after this can look up a path,
    connect, exec, fork, or signal anything but itself."""
    if confinement.scopes >= 0:
        # Before closing the descriptors: the ruleset is one of them.
        _enforce_landlock(confinement.scopes)
    close_other_fds(keep_fds)
    set_limits(memory_mb, cpu_seconds, max(keep_fds))
    drop_privileges()
    # Only now: a change of user clears the parent-death signal.
    set_parent_death_signal(parent_pid)
    confinement.seccomp.load()
