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
import shutil
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from pathlib import Path
from typing import Any, NoReturn

import anyio
import anyio.abc
from mcp.shared.message import SessionMessage

from onetool.config import ServerConfig
from onetool.logs import logger
from onetool.stdio_lines import LineReader, LineWriter, parse_line
from onetool.upstream._stderr import bounded_lines
from onetool.upstream.ancestry import inherited
from onetool.upstream.environment import passed_environment
from onetool.upstream.transports._base import Link, Streams
from onetool.upstream.transports._process import StdioChild, stop_process_group


def resolve_command(config: ServerConfig, env: dict[str, str]) -> str:
    """The executable's path, searched on the child's PATH, then beside OneTool's own interpreter, or a clear error.

    The second place finds servers installed into OneTool's virtualenv (``mcp-server-time``) when
    ``.venv/bin/onetool`` is run without activating the venv, as MCP clients do. A command that is a path is that
    file, or an OSError that says what is wrong with it (its ``filename`` the full path).
    """
    assert config.command is not None
    if os.sep in config.command:
        # A relative path (`./server.sh`) is relative to where the server runs, not to our own directory.
        path = config.cwd / config.command if config.cwd is not None else Path(config.command)
        return shutil.which(str(path)) or _unusable(path.absolute())
    own_bin = os.path.dirname(sys.executable)
    found = shutil.which(config.command, path=env.get("PATH")) or shutil.which(config.command, path=own_bin)
    if found is None:
        raise FileNotFoundError(errno.ENOENT, "command not found", config.command)
    return found


def _unusable(path: Path) -> NoReturn:
    """Why the file a command names cannot be started."""
    if path.is_dir():
        raise IsADirectoryError(errno.EISDIR, "is a directory", str(path))
    if path.exists():
        raise PermissionError(errno.EACCES, "is not executable", str(path))
    raise FileNotFoundError(errno.ENOENT, "does not exist", str(path))


@asynccontextmanager
async def open_stdio(link: Link) -> AsyncIterator[Streams]:
    """Start the server and yield its (read stream, write stream); ``link.child`` is the process meanwhile.

    The read stream ends when the child closes its stdout (it died), which the SDK turns
    into "Connection closed" for every request in flight. Its stderr lines go to ``link.stderr``;
    ``link.children`` records its process group until the group has ended.
    """
    name, config, stderr, children = link.name, link.config, link.stderr, link.children
    passed = passed_environment(os.environ)
    env = passed | inherited() | config.env
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
    child = link.child = StdioChild(process, stderr)
    log = logger.bind(server=name, pid=process.pid)
    # Names only: a proxy URL's credentials never reach the log (onetool.upstream.environment).
    log.debug("started; from the gateway's environment: {}", ", ".join(sorted(passed)) or "nothing")
    assert process.stdin is not None and process.stdout is not None
    reader = _StdoutReader(process.stdout, log, child, config.max_message_bytes, link.too_long)
    writer = _StdinWriter(process.stdin, reader)

    async def read_stderr() -> None:
        assert process.stderr is not None
        async for raw in bounded_lines(_receive_all(process.stderr)):
            if raw.strip():
                log.debug("stderr: {}", stderr.add(raw))

    async with anyio.create_task_group() as tg:
        tg.start_soon(read_stderr)
        try:
            yield reader, writer
        finally:
            # Shielded and bounded: a cancelled owner must still leave no process behind.
            with anyio.CancelScope(shield=True):
                reader.close()
                await writer.aclose()
                if await stop_process_group(process) and children is not None:
                    children.remove(process.pid)
            tg.cancel_scope.cancel()


class _StdoutReader(LineReader):
    """The child's stdout. It ends when the child closes it (it died), at :meth:`close` (writing to the child
    failed), or at a message longer than the server's cap, which the SDK turns into "Connection closed" for every
    request in flight."""

    def __init__(
        self, stdout: anyio.abc.ByteReceiveStream, log: Any, child: StdioChild, max_line: int, refusal: str
    ) -> None:
        super().__init__(max_line)
        self._stdout = stdout
        self._log = log
        self._reading = anyio.CancelScope()
        self._child = child
        self._refusal = refusal

    def _overflow(self, lines: list[bytes]) -> None:
        super()._overflow(lines)
        self._child.refused = self._refusal
        self._log.warning("the server {}: its process is stopped, and started again", self._refusal)

    def close(self) -> None:
        super().close()
        self._reading.cancel()

    async def _read(self) -> bytes:
        with anyio.CancelScope() as self._reading:
            try:
                return await self._stdout.receive()
            except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
                return b""
        return b""  # closed meanwhile

    def _message(self, line: bytes) -> SessionMessage | None:
        try:
            return parse_line(line)
        except ValueError:
            # Junk on stdout is the server's bug; skipping it keeps the session alive.
            self._log.debug("ignored a line on the server's stdout that is not JSON-RPC: {!r}", line[:200])
            return None


class _StdinWriter(LineWriter):
    """The child's stdin. A failed write ends the reader too: the child is gone or going."""

    def __init__(self, stdin: anyio.abc.ByteSendStream, reader: _StdoutReader) -> None:
        super().__init__()
        self._stdin = stdin
        self._reader = reader

    async def _write(self, data: bytes) -> None:
        try:
            await self._stdin.send(data)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
            self._reader.close()
            raise anyio.BrokenResourceError from None  # the SDK's "Connection closed" for this request


async def _receive_all(stream: anyio.abc.ByteReceiveStream) -> AsyncIterator[bytes]:
    with suppress(anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
        while True:
            yield await stream.receive()
