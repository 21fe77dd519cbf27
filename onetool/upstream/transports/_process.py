"""A stdio upstream's process as the connection sees it, and the end of its process group.

The group is ended whatever the leader did: close stdin, wait; SIGTERM the group, wait; SIGKILL it; reap. A
server that exits gracefully on stdin EOF can leave its own children in the group, and they must not outlive us.
"""

from __future__ import annotations

import os
import re
import signal
from collections.abc import Callable
from contextlib import suppress
from typing import Final

import anyio
import anyio.abc

from onetool.upstream._stderr import StderrTail
from onetool.upstream.groups import stat_fields
from onetool.upstream.status import Failure

STDIN_GRACE: Final = 1.0  # a well-behaved server exits on stdin EOF
TERM_GRACE: Final = 1.0  # then SIGTERM to the group, then SIGKILL
_POLL: Final = 0.01
_ERROR_LINE: Final = re.compile(
    r"error|exception|cannot|can't|not found|no such|denied|refused|failed|fatal|invalid|missing", re.IGNORECASE
)


class StdioChild:
    """What the connection may know about a running child: its process and the stderr lines it wrote."""

    def __init__(self, process: anyio.abc.Process, stderr: StderrTail) -> None:
        self.process = process
        self._stderr = stderr
        self._first = stderr.count  # the server's tail spans its restarts: this process's lines come after
        self.refused: str | None = None
        """Why the gateway stopped reading the process's stdout, if it did."""

    def failure(self, fix: str | None = None) -> Failure:
        """Why the session with this process ended: the cap it broke (the server may be fine: it answered more
        than the gateway holds at once), or how it exited, with ``fix``. The reason is for anyone to read: the
        stderr line goes only to operators (it may hold secrets)."""
        if self.refused is not None:
            return Failure(self.refused, fix="ask the tool for less at once; the server is being connected again")
        code = self.process.returncode
        return Failure("closed its stdout" if code is None else _describe_exit(code), self.stderr_hint(), fix)

    def stderr_hint(self) -> str | None:
        """The stderr line that most likely says what went wrong, for operators only.

        A crashing server's last lines are usually a stack trace or a runtime banner ("Node.js v20");
        the first line that reads like an error ("Error: Cannot find module ...") says more.
        """
        lines = self._stderr.lines(since=self._first)
        for line in lines:
            if _ERROR_LINE.search(line):
                return line
        return lines[-1] if lines else None


def _describe_exit(code: int) -> str:
    if code < 0:
        with suppress(ValueError):
            return f"process killed by {signal.Signals(-code).name}"
    return f"process exited with status {code}"


async def stop_process_group(process: anyio.abc.Process) -> bool:
    """Close stdin, wait; SIGTERM the group, wait; SIGKILL the group; reap. Bounded (~2.5 s), idempotent.

    The group is signalled even when the leader exited on its own: anything it started is
    still in the group and would otherwise outlive us. Whether the group has ended (a member
    we may not signal can stay).
    """
    if process.stdin is not None:
        with suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
            await process.stdin.aclose()
    await _wait_until(lambda: process.returncode is not None, STDIN_GRACE)
    pgid = process.pid  # start_new_session: the leader's pid is the group id
    ended = not _signal_group(pgid, signal.SIGTERM) or await _wait_until(lambda: not _group_alive(pgid), TERM_GRACE)
    if not ended:
        ended = not _signal_group(pgid, signal.SIGKILL) or await _wait_until(lambda: not _group_alive(pgid), 0.5)
    await _wait_until(lambda: process.returncode is not None, 0.5)
    with anyio.move_on_after(0.5), suppress(OSError, anyio.BrokenResourceError, ProcessLookupError):
        await process.aclose()  # reaps the leader and closes the pipes (no ResourceWarning)
    return ended


def _signal_group(pgid: int, sig: signal.Signals) -> bool:
    """Signal the whole group; False when no member is left."""
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    if not os.path.isdir("/proc"):
        return True
    # A zombie leader (exited, not yet reaped) still counts as a member; only live ones matter here.
    return any(_is_live_member(int(pid), pgid) for pid in os.listdir("/proc") if pid.isdigit())


def _is_live_member(pid: int, pgid: int) -> bool:
    fields = stat_fields(pid)
    return fields is not None and int(fields[2]) == pgid and fields[0] != b"Z"


async def _wait_until(condition: Callable[[], bool], timeout: float) -> bool:
    with anyio.move_on_after(timeout):
        while not condition():
            await anyio.sleep(_POLL)
        return True
    return False
