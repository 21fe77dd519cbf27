"""The stdio transport: one child process per upstream, in its own process group, recorded so it never outlives us.

Why not the SDK's ``stdio_client``: it hides the child's pid, so nothing can kill the
group members a server leaves behind when it exits gracefully on stdin EOF; its stderr
must be a real file, not our log; and its worst-case shutdown (2 s stdin grace, 2 s after
SIGTERM, 2 s for the kill to land) overruns the gateway's 5 s shutdown budget. The framing
(one JSON-RPC message per line) and message models are the SDK's own.
"""

from __future__ import annotations

import errno
import os
import re
import shutil
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager, suppress
from typing import Final, NoReturn

import anyio
import anyio.abc
import mcp.types as types
from loguru import logger
from mcp.client.stdio import get_default_environment
from mcp.shared.message import SessionMessage

from onetool.config import ServerConfig
from onetool.upstream.children import Children
from onetool.upstream.groups import stat_fields
from onetool.upstream.stderr import StderrTail, bounded_lines

__all__ = ["StdioChild", "open_stdio"]

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

    def exit_reason(self) -> str:
        """How the process ended, for anyone to read: its stderr stays out (it may hold secrets)."""
        code = self.process.returncode
        return "closed its stdout" if code is None else _describe_exit(code)

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


def resolve_command(config: ServerConfig, env: dict[str, str]) -> str:
    """The executable's path, searched on the child's PATH, then beside OneTool's own interpreter, or a clear error.

    The second place finds servers installed into OneTool's virtualenv (``mcp-server-time``) when
    ``.venv/bin/onetool`` is run without activating the venv, as MCP clients do.
    """
    assert config.command is not None
    if os.sep in config.command and config.cwd is not None:
        # A relative path (`./server.sh`) is relative to where the server runs, not to our own directory.
        return shutil.which(str(config.cwd / config.command)) or _not_found(config.command)
    own_bin = os.path.dirname(sys.executable)
    found = shutil.which(config.command, path=env.get("PATH")) or shutil.which(config.command, path=own_bin)
    return found or _not_found(config.command)


def _not_found(command: str) -> NoReturn:
    raise FileNotFoundError(errno.ENOENT, "command not found", command)


@asynccontextmanager
async def open_stdio(
    name: str, config: ServerConfig, stderr: StderrTail, children: Children | None = None
) -> AsyncIterator[
    tuple[
        anyio.abc.ObjectReceiveStream[SessionMessage | Exception],
        anyio.abc.ObjectSendStream[SessionMessage],
        StdioChild,
    ]
]:
    """Start the server and yield (read stream, write stream, child).

    The read stream ends when the child closes its stdout (it died), which the SDK turns
    into "Connection closed" for every request in flight. Its stderr lines go to ``stderr``; ``children``
    records its process group until the group has ended.
    """
    env = get_default_environment() | config.env
    command = resolve_command(config, env)
    process = await anyio.open_process(
        [command, *config.args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        cwd=config.cwd,
        start_new_session=True,
    )
    if children is not None:
        children.add(name, process.pid)
    child = StdioChild(process, stderr)
    log = logger.bind(server=name, pid=process.pid)
    read_send, read_recv = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_send, write_recv = anyio.create_memory_object_stream[SessionMessage](0)

    async def read_stdout() -> None:
        assert process.stdout is not None
        async with read_send:
            buffer = b""
            async for chunk in _receive_all(process.stdout):
                *lines, buffer = (buffer + chunk).split(b"\n")
                for line in lines:
                    if not line.strip():
                        continue
                    try:
                        message = types.jsonrpc_message_adapter.validate_json(line, by_name=False)
                    except ValueError:
                        # Junk on stdout is the server's bug; skipping it keeps the session alive.
                        log.debug("ignored a line on the server's stdout that is not JSON-RPC: {!r}", line[:200])
                        continue
                    try:
                        await read_send.send(SessionMessage(message))
                    except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                        return

    async def read_stderr() -> None:
        assert process.stderr is not None
        async for raw in bounded_lines(_receive_all(process.stderr)):
            if raw.strip():
                log.debug("stderr: {}", stderr.add(raw))

    async def write_stdin() -> None:
        assert process.stdin is not None
        try:
            async with write_recv:
                async for message in write_recv:
                    data = message.message.model_dump_json(by_alias=True, exclude_unset=True) + "\n"
                    await process.stdin.send(data.encode())
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
            # The child is gone or going; ending the read side fails the requests in flight.
            await read_send.aclose()

    async with anyio.create_task_group() as tg:
        tg.start_soon(read_stdout)
        tg.start_soon(read_stderr)
        tg.start_soon(write_stdin)
        try:
            yield read_recv, write_send, child
        finally:
            # Shielded and bounded: a cancelled owner must still leave no process behind.
            with anyio.CancelScope(shield=True):
                await write_send.aclose()
                await read_recv.aclose()
                if await stop_process_group(process) and children is not None:
                    children.remove(process.pid)
            tg.cancel_scope.cancel()


async def _receive_all(stream: anyio.abc.ByteReceiveStream) -> AsyncIterator[bytes]:
    with suppress(anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
        while True:
            yield await stream.receive()


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
