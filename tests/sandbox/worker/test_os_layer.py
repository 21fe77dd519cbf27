"""The OS layer on its own: plain Python in a confined worker (tests/sandbox/worker/confined.py) must be stopped by
the kernel, each attempt with its own specific failure; and what production workers look like from outside."""

from __future__ import annotations

import errno
import os
import signal
from pathlib import Path
from typing import Any

import anyio
import pytest

from sandbox import Limits, Sandbox
from sandbox.worker.confine import landlock_abi
from tests.sandbox.conftest import assert_no_leak, make_on_call
from tests.sandbox.host.test_forkserver import _children, _zygote_pid
from tests.sandbox.worker.confined import Outcome, run_confined

ROOT = os.geteuid() == 0
NOBODY = 65534
EPERM = Outcome(error="PermissionError", errno=errno.EPERM)
RAW_EPERM = [-1, errno.EPERM]
"""A raw syscall through ctypes: its return value and errno."""

# Run a call on an existing and on a missing path: both must fail with the same errno, or nothing is hidden.
ORACLE = (
    "import os\n"
    "def errno_of(call):\n"
    "    try:\n"
    "        call()\n"
    "    except OSError as exc:\n"
    "        return exc.errno\n"
    "    return 'succeeded'\n"
)
SYSCALL = (
    "import ctypes\n"
    "libc = ctypes.CDLL(None, use_errno=True)\n"
    "buf = ctypes.create_string_buffer(4096)\n"
    "def raw(number, *args):\n"
    "    ctypes.set_errno(0)\n"
    "    return [libc.syscall(number, *args), ctypes.get_errno()]\n"
)


def _paths(template: str, existing: str, missing: str) -> str:
    """A payload applying `template` (a lambda body over `p`) to an existing and a missing path."""
    return ORACLE + f"[errno_of(lambda: {template}) for p in ({existing!r}, {missing!r})]"


def _raw_paths(template: str, existing: str, missing: str) -> str:
    return SYSCALL + f"[{template} for p in ({existing!r}.encode(), {missing!r}.encode())]"


# (id, plain Python, exactly how it must end)
OS_CORPUS: list[tuple[str, str, Outcome]] = [
    ("read_hostname", "open('/etc/hostname').read()", EPERM),
    ("read_passwd", "open('/etc/passwd').read()", EPERM),
    ("os_open", "import os\nos.read(os.open('/etc/passwd', os.O_RDONLY), 100)", EPERM),
    ("listdir", "import os\nos.listdir('/')", EPERM),
    ("socket", "import socket\nsocket.socket().connect(('127.0.0.1', 1))", EPERM),
    ("socketpair", "import socket\nsocket.socketpair()", EPERM),
    ("subprocess", "import subprocess\nsubprocess.run(['id'], capture_output=True).stdout", EPERM),
    # glibc reports a shell it could not spawn as exit status 127; `exit 3` would be 768 had one run.
    ("os_system", "import os\nos.system('exit 3')", Outcome(value=127 << 8)),
    ("execv", "import os\nos.execv('/usr/bin/id', ['id'])", EPERM),
    ("fork", "import os\nos.fork()", EPERM),
    (
        "thread",
        "import threading\nthreading.Thread(target=print).start()",
        Outcome(error="RuntimeError", message="can't start new thread"),
    ),
    ("environ", "import os\nsorted(set(os.environ) - {'LC_CTYPE'})", Outcome(value=[])),
    ("proc_environ", "open('/proc/self/environ').read()", EPERM),
    ("parent_environ", "open('/proc/1/environ').read()", EPERM),
    ("kill_parent", "import os, signal\nos.kill(1, signal.SIGKILL)", EPERM),
    (
        "raise_rlimit",
        "import resource\nresource.setrlimit(resource.RLIMIT_AS, (-1, -1))",
        Outcome(error="ValueError", message="not allowed to raise maximum limit"),
    ),
    ("write_file", "open('x', 'w').write('x')", EPERM),
    ("uname", "import os\nos.uname().nodename", EPERM),
    ("new_import", "import sqlite3", Outcome(error="ModuleNotFoundError", message="No module named 'sqlite3'")),
    ("ctypes_fork_syscall", SYSCALL + "raw(57)", Outcome(value=RAW_EPERM)),
    (
        "gc_walk_host",
        "import gc\n[o for o in gc.get_objects() if isinstance(o, str) and 'canary' in o]",
        Outcome(value=[]),
    ),
    # Item 9: no path lookup tells an existing path from a missing one.
    ("stat_shadow", _paths("os.stat(p)", "/etc/shadow", "/etc/no-such-shadow"), Outcome(value=[errno.EPERM] * 2)),
    ("stat_hostname", _paths("os.stat(p)", "/etc/hostname", "/etc/no-such-host"), Outcome(value=[errno.EPERM] * 2)),
    ("lstat", _paths("os.lstat(p)", "/etc/passwd", "/etc/no-such-passwd"), Outcome(value=[errno.EPERM] * 2)),
    ("stat_proc_1", _paths("os.stat(p)", "/proc/1", "/proc/999999999"), Outcome(value=[errno.EPERM] * 2)),
    (
        "readlink_exe",
        _paths("os.readlink(p)", "/proc/self/exe", "/proc/self/no-such-link"),
        Outcome(value=[errno.EPERM] * 2),
    ),
    (
        "dotdot_walk",
        _paths("os.stat(p)", "../../../../../../etc/passwd", "../../../../../../etc/no-such"),
        Outcome(value=[errno.EPERM] * 2),
    ),
    ("exists", "import os\n[os.path.exists(p) for p in ('/root', '/no-such-root')]", Outcome(value=[False, False])),
    (
        "os_access",
        "import os\n[os.access(p, os.F_OK) for p in ('/etc/passwd', '/etc/no-such')]",
        Outcome(value=[False, False]),
    ),
    ("access", _raw_paths("raw(21, p, 0)", "/etc/passwd", "/etc/no-such"), Outcome(value=[RAW_EPERM] * 2)),
    # newfstatat(AT_FDCWD, path, buf, AT_EMPTY_PATH): still resolves a non-empty path.
    (
        "newfstatat_empty_path",
        _raw_paths("raw(262, -100, p, buf, 0x1000)", "/etc/passwd", "/etc/no-such"),
        Outcome(value=[RAW_EPERM] * 2),
    ),
    (
        "statx",
        _raw_paths("raw(332, -100, p, 0x1000, 0xFFF, buf)", "/etc/passwd", "/etc/no-such"),
        Outcome(value=[RAW_EPERM] * 2),
    ),
    # Item 10: no privilege to use, nothing of the host to see.
    ("ids", "import os\n[os.getuid(), os.geteuid(), os.getgid(), os.getegid()]", Outcome(value=[NOBODY] * 4)),
    ("setuid_root", "import os\nos.setuid(0)", EPERM),
    ("setresuid_raw", SYSCALL + "raw(117, 0, 0, 0)", Outcome(value=RAW_EPERM)),
    ("capget", SYSCALL + "raw(125, buf, buf)", Outcome(value=RAW_EPERM)),
    ("unshare_user", SYSCALL + "raw(272, 0x10000000)", Outcome(value=RAW_EPERM)),
    ("setns", SYSCALL + "raw(308, 0, 0)", Outcome(value=RAW_EPERM)),
    ("chroot_escape", SYSCALL + "raw(161, b'..')", Outcome(value=RAW_EPERM)),
    ("mount", SYSCALL + "raw(165, b'none', b'/', b'tmpfs', 0, 0)", Outcome(value=RAW_EPERM)),
    ("keyctl", SYSCALL + "raw(250, 0, 0, 0, 0, 0)", Outcome(value=RAW_EPERM)),
    ("bpf", SYSCALL + "raw(321, 0, buf, 128)", Outcome(value=RAW_EPERM)),
    ("perf_event_open", SYSCALL + "raw(298, buf, 0, -1, -1, 0)", Outcome(value=RAW_EPERM)),
    ("userfaultfd", SYSCALL + "raw(323, 0)", Outcome(value=RAW_EPERM)),
    ("io_uring_setup", SYSCALL + "raw(425, 8, buf)", Outcome(value=RAW_EPERM)),
    ("ptrace_attach", SYSCALL + "raw(101, 16, 1, 0, 0)", Outcome(value=RAW_EPERM)),
    ("process_vm_readv", SYSCALL + "raw(310, 1, buf, 1, buf, 1, 0)", Outcome(value=RAW_EPERM)),
    # The fork-server stand-in is pid 1 of its own pid namespace, as the zygote is: no host pid in sight.
    ("own_pid", "import os\nos.getpid()", Outcome(value=2)),
    ("getppid", "import os\nos.getppid()", Outcome(value=-errno.EPERM)),
]


def _matches(outcome: Outcome, expected: Outcome) -> bool:
    if expected.error is None:
        return outcome == expected
    return (
        outcome.error == expected.error
        and outcome.errno == expected.errno
        and (not expected.message or outcome.message == expected.message)
    )


ROOT_ONLY = {"ids": "workers become nobody", "own_pid": "the fork-server gets a pid namespace"}


@pytest.mark.parametrize(("name", "code", "expected"), OS_CORPUS, ids=[i for i, _, _ in OS_CORPUS])
def test_os_layer_alone(name: str, code: str, expected: Outcome) -> None:
    if name in ROOT_ONLY and not ROOT:
        pytest.skip(f"{ROOT_ONLY[name]} only when the gateway runs as root")
    outcome = run_confined(code)
    assert_no_leak(outcome)
    assert _matches(outcome, expected), f"expected {expected}, got {outcome}"


def test_the_runner_reaches_plain_python() -> None:
    """Without this, a runner that stopped everything would pass every payload above that expects an error."""
    assert run_confined("import os\nx = [len(os.__name__), sorted({3, 1, 2})]\nx") == Outcome(value=[2, [1, 2, 3]])
    assert run_confined("import ctypes\nctypes.string_at(0)") == Outcome(died=-signal.SIGSEGV)


def test_an_unprivileged_gateway_still_runs_and_confines() -> None:
    """Not root: no pid namespace of the host's making, no nobody; the user namespace and the rest still apply."""
    assert run_confined("sum(range(10))", as_user=NOBODY) == Outcome(value=45)
    assert _matches(run_confined("open('/etc/hostname')", as_user=NOBODY), EPERM)
    assert run_confined(_paths("os.stat(p)", "/etc", "/no-such"), as_user=NOBODY) == Outcome(value=[errno.EPERM] * 2)


@pytest.mark.skipif(landlock_abi() < 6, reason="Landlock scopes (signals) need Landlock ABI 6")
def test_landlock_holds_without_seccomp() -> None:
    """Seccomp allowing everything, as the same user as the fork-server (an unprivileged gateway's workers stay
    root of their user namespace, so no uid check stops a signal): the fork-server's Landlock domain, inherited,
    still denies files and TCP, and the worker's own domain keeps it from signalling the fork-server."""

    def alone(code: str) -> Outcome:
        return run_confined(code, as_user=NOBODY, seccomp=False)

    denied = Outcome(error="PermissionError", errno=errno.EACCES)
    # Signals work at all, and the directory is the worker's own: only Landlock stands in the way below.
    assert alone("import os\nos.kill(os.getpid(), 0)") == Outcome(value=None)
    assert _matches(alone("import os\nos.kill(os.getppid(), 0)"), EPERM)
    assert _matches(alone("import os\nos.open('.', os.O_RDONLY)"), denied)
    assert _matches(alone("import socket\nsocket.socket().connect(('127.0.0.1', 1))"), denied)


def _status(pid: int) -> dict[str, str]:
    lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    return {key: value.strip() for key, _, value in (line.partition(":") for line in lines)}


async def _confined_worker(box: Sandbox) -> int:
    """A pool worker of `box` that has finished confining itself."""
    with anyio.fail_after(10):
        while True:
            for pid in _children(_zygote_pid(box)):
                try:
                    if _status(pid).get("Seccomp") == "2":
                        return pid
                except OSError:
                    continue
            await anyio.sleep(0.05)


async def test_production_worker_has_no_privilege_and_its_own_namespaces(sandbox: Sandbox) -> None:
    pid = await _confined_worker(sandbox)
    status = _status(pid)
    for key in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"):
        assert int(status[key], 16) == 0, (key, status[key])
    assert status["NoNewPrivs"] == "1"
    if ROOT:
        assert status["Uid"].split() == [str(NOBODY)] * 4
        assert status["Gid"].split() == [str(NOBODY)] * 4
        assert status["Groups"] == ""
        # Host pid, then its pid in the zygote's namespace.
        assert len(status["NSpid"].split()) == 2
        for namespace in ("pid", "net", "ipc", "uts"):
            assert os.readlink(f"/proc/{pid}/ns/{namespace}") != os.readlink(f"/proc/self/ns/{namespace}"), namespace
        assert os.readlink(f"/proc/{pid}/root").endswith("(deleted)")


async def test_zygote_killed_mid_run_leaves_no_zombie_and_no_orphan() -> None:
    busy = anyio.Event()
    echo = make_on_call()

    async def on_call(*args: Any) -> Any:
        busy.set()
        return await echo(*args)

    async with Sandbox(Limits(timeout=5.0), warm=2) as box:
        outcome: list[Any] = []

        async def run() -> None:
            outcome.append(
                await box.run("demo.echo(1)\nwhile True:\n    pass", packs={"demo": ["echo"]}, on_call=on_call)
            )

        async with anyio.create_task_group() as tg:
            tg.start_soon(run)
            await busy.wait()
            zygote = _zygote_pid(box)
            workers = set(_children(zygote))
            assert len(workers) >= 2, workers
            os.kill(zygote, signal.SIGKILL)
        assert outcome[0].error is not None and outcome[0].error.type == "WorkerCrashed", outcome
        # The host reaps the zygote; the kernel killed and reaped its workers before that, as part of the
        # death of their pid namespace's init. Not later: none was ever an orphan, or a zombie, of pid 1.
        with anyio.fail_after(5):
            while Path(f"/proc/{zygote}").exists():
                await anyio.sleep(0.01)
        left = {pid: Path(f"/proc/{pid}/stat").read_text() for pid in workers if Path(f"/proc/{pid}").exists()}
        assert not left, f"left behind: {left}"
        assert (await box.run("6 * 7", packs={}, on_call=make_on_call())).value == 42
