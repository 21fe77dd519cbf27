"""OS layer: the security boundary around one worker process.

The seccomp filter is an allow-list. Everything a finished, fully imported interpreter needs to compute
and to talk over its two pipe ends is allowed; every other system call fails with EPERM, so Python code
sees a clean PermissionError (or OSError) rather than a dead process. That denies, among others, every
way to open a file or directory, sockets, exec, fork/clone (no threads or processes), ptrace,
process_vm_*, mount, setrlimit (root could raise its own limits back) and every signal (kill, tgkill):
the worker's own process never needs to send one.
"""

from __future__ import annotations

import ctypes
import errno
import math
import os
import resource
import signal

_PR_SET_PDEATHSIG = 1
_PR_SET_NO_NEW_PRIVS = 38
_PR_SET_SECCOMP = 22
_SECCOMP_MODE_FILTER = 2
_BPF_INSTRUCTION_SIZE = 8
_libc = ctypes.CDLL(None, use_errno=True)
_AT_EMPTY_PATH = 0x1000

# System calls a running interpreter needs; anything else is EPERM.
_ALLOWED = (
    "read",
    "write",
    "close",
    "lseek",
    "fstat",
    "brk",
    "mmap",
    "munmap",
    "mremap",
    "mprotect",
    "madvise",
    "futex",
    "rt_sigaction",
    "rt_sigprocmask",
    "rt_sigreturn",
    "sigaltstack",
    "clock_gettime",
    "clock_getres",
    "gettimeofday",
    "time",
    "clock_nanosleep",
    "nanosleep",
    "getpid",
    "gettid",
    "getrandom",
    "getrusage",
    "sched_yield",
    "restart_syscall",
    "exit",
    "exit_group",
)


def set_parent_death_signal(host_pid: int) -> None:
    """Die with the host: the kernel sends SIGKILL when the parent goes, and a parent already gone is caught."""
    if _libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG) failed")
    if os.getppid() != host_pid:
        os._exit(1)


def compile_filter() -> bytes:
    """The BPF program, generated once by the host: a worker then neither imports libseccomp (30 ms of
    start-up) nor compiles it per run; confining costs one prctl."""
    import pyseccomp as seccomp  # host side only: the worker receives the compiled program

    flt = seccomp.SyscallFilter(seccomp.ERRNO(errno.EPERM))
    for name in _ALLOWED:
        flt.add_rule(seccomp.ALLOW, name)
    # fstat on an open descriptor, never a path lookup.
    flt.add_rule(seccomp.ALLOW, "newfstatat", seccomp.Arg(3, seccomp.MASKED_EQ, _AT_EMPTY_PATH, _AT_EMPTY_PATH))
    # Reading limits is harmless; setting them is how root would undo them.
    flt.add_rule(seccomp.ALLOW, "prlimit64", seccomp.Arg(0, seccomp.EQ, 0), seccomp.Arg(2, seccomp.EQ, 0))
    read_fd, write_fd = os.pipe()
    try:
        with os.fdopen(write_fd, "wb", closefd=False) as sink:
            flt.export_bpf(sink)
        os.close(write_fd)
        write_fd = -1
        chunks = []
        while chunk := os.read(read_fd, 65536):
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(read_fd)
        if write_fd >= 0:
            os.close(write_fd)


class _SockFprog(ctypes.Structure):
    _fields_ = (("len", ctypes.c_ushort), ("filter", ctypes.c_void_p))


def load_filter(program: bytes) -> None:
    instructions = ctypes.create_string_buffer(program, len(program))
    fprog = _SockFprog(len(program) // _BPF_INSTRUCTION_SIZE, ctypes.addressof(instructions))
    if _libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS) failed")
    if _libc.prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_SECCOMP) failed")


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


def confine(program: bytes, memory_mb: int, cpu_seconds: float, keep_fds: tuple[int, ...]) -> None:
    """Irreversibly shut the worker in; nothing after this can open, connect, exec or fork."""
    close_other_fds(keep_fds)
    # A write past RLIMIT_FSIZE should fail with EFBIG, not kill the worker.
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    set_limits(memory_mb, cpu_seconds, max(keep_fds))
    load_filter(program)
