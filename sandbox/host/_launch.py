"""Starting the fork-server: as the init of a pid namespace of its own, where the kernel lets us make one.

Then, whatever kills the zygote (even SIGKILL), the kernel kills every worker it forked and reaps them
itself: none is left an orphan, or a zombie under a pid 1 that does not reap. Workers also see pids of
their namespace only (the zygote is 1), never the host's.

The namespace is made for the calling thread alone (unshare changes that thread's pid namespace for
children), around one synchronous Popen, and undone at once: nothing else can be forked into it.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import logging
import os
import signal
import subprocess
from collections.abc import Iterator

import anyio

from sandbox.worker.confine import landlock_abi

__all__ = ["ZygoteProcess", "spawn"]

_CLONE_NEWPID = 0x20000000
_libc = ctypes.CDLL(None, use_errno=True)
_log = logging.getLogger(__name__)


@contextlib.contextmanager
def _pid_namespace_for_children() -> Iterator[bool]:
    """Children forked by this thread inside the block start a new pid namespace; whether they do."""
    previous = os.open("/proc/thread-self/ns/pid_for_children", os.O_RDONLY)
    try:
        if _libc.unshare(_CLONE_NEWPID) != 0:
            yield False
            return
        try:
            yield True
        finally:
            # Left in place, every later fork of this thread would land in the zygote's namespace.
            if _libc.setns(previous, _CLONE_NEWPID) != 0:
                raise OSError(ctypes.get_errno(), "could not leave the sandbox's pid namespace")
    finally:
        os.close(previous)


@functools.cache
def _note_layers(pid_namespace: bool) -> None:
    """Once per process, at DEBUG: which optional layers this kernel and these privileges give workers."""
    _log.debug(
        "sandbox layers: pid namespace %s, Landlock ABI %d, %s",
        "yes" if pid_namespace else "no (workers see host pids; orphans go to pid 1)",
        landlock_abi(),
        "workers drop root for nobody" if os.geteuid() == 0 else "workers run in a user namespace if allowed",
    )


def spawn(argv: list[str], stdin: int) -> subprocess.Popen[bytes]:
    """Start a fork-server with `stdin` as its fd 0, an empty environment and a session of its own."""
    with _pid_namespace_for_children() as isolated:
        process = subprocess.Popen(
            argv,
            stdin=stdin,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            cwd="/",
            env={},
            start_new_session=True,
        )
    _note_layers(isolated)
    return process


class ZygoteProcess:
    """The host's async handle on a fork-server started by `spawn`: waited for and killed through a pidfd."""

    def __init__(self, argv: list[str], stdin: int) -> None:
        self._popen = spawn(argv, stdin)
        self.pid = self._popen.pid
        self._pidfd = os.pidfd_open(self.pid)

    @property
    def returncode(self) -> int | None:
        return self._popen.poll()

    async def wait(self) -> int:
        while (code := self._popen.poll()) is None:
            await anyio.wait_readable(self._pidfd)
        return code

    def kill(self) -> None:
        if self._popen.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                signal.pidfd_send_signal(self._pidfd, signal.SIGKILL)

    async def aclose(self) -> None:
        """Wait for the exit (kill first if it should not wait) and release the pidfd."""
        try:
            await self.wait()
        finally:
            os.close(self._pidfd)
