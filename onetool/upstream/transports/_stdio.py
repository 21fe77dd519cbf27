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
from typing import NoReturn

import anyio
import anyio.abc
import mcp.types as types
from mcp.client.stdio import get_default_environment
from mcp.shared.message import SessionMessage

from onetool.config import ServerConfig
from onetool.logs import logger
from onetool.upstream._stderr import bounded_lines
from onetool.upstream.ancestry import inherited
from onetool.upstream.transports._base import Link, Streams
from onetool.upstream.transports._process import StdioChild, stop_process_group


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
async def open_stdio(link: Link) -> AsyncIterator[Streams]:
    """Start the server and yield its (read stream, write stream); ``link.child`` is the process meanwhile.

    The read stream ends when the child closes its stdout (it died), which the SDK turns
    into "Connection closed" for every request in flight. Its stderr lines go to ``link.stderr``;
    ``link.children`` records its process group until the group has ended.
    """
    name, config, stderr, children = link.name, link.config, link.stderr, link.children
    env = get_default_environment() | inherited() | config.env
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
    link.child = StdioChild(process, stderr)
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
            yield read_recv, write_send
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
