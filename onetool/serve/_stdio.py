"""MCP over stdio: one JSON-RPC message per line on stdin and stdout, read and written on the event loop.

Why not the SDK's ``stdio_server``: it reads stdin on a worker thread and writes each message and each flush
through another, two thread hops per message in each direction, which a code-mode gateway pays on every
run; and cancellation waits for the reading thread, so a SIGTERM while the client keeps stdin open would
hang. Here the loop waits for the descriptors to be ready and reads and writes them itself.

While serving, fd 0 points at the null device and fd 1 at stderr (as the SDK does), so children never read
protocol bytes and stray prints never corrupt the wire; the protocol uses private duplicates.

Each request read is reported to the gateway's drain, and closed once its answer is written: a drained run's
answer goes out before the gateway stops.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import stat
from collections.abc import Iterator
from typing import Any

import anyio
import mcp.types as types
from anyio.abc import ObjectReceiveStream, ObjectSendStream
from mcp.server import Server
from mcp.shared.message import SessionMessage

from onetool.drain import Drain
from onetool.logs import logger
from onetool.serve._drain import stdio_carrier

_CHUNK = 1 << 16


async def serve_stdio(server: Server[Any], drain: Drain | None = None) -> None:
    """Serve ``server`` (one face) on stdin/stdout until stdin reaches EOF or the caller cancels; ``drain``: the
    gateway's, told when each request arrives and when its answer is written."""
    drain = drain or Drain()
    with _claimed(0, os.devnull) as wire_in, _claimed(1, None) as wire_out:
        reads, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](0)
        write_stream, writes = anyio.create_memory_object_stream[SessionMessage](0)
        reader = anyio.CancelScope()

        async def read() -> None:
            with reader:
                await _read_lines(wire_in, reads, drain)

        async with anyio.create_task_group() as tg:
            tg.start_soon(read)
            tg.start_soon(_write_lines, wire_out, writes, drain)
            logger.info("serving MCP over stdio")
            try:
                await server.run(read_stream, write_stream, server.create_initialization_options())
            finally:
                # The writer drains what the server already sent, then ends; the reader may still wait.
                write_stream.close()
                reader.cancel()
    logger.info("stdio server done")


@contextlib.contextmanager
def _claimed(fd: int, diversion: str | None) -> Iterator[int]:
    """A private duplicate of ``fd`` for the protocol; ``fd`` itself points at ``diversion`` (None: stderr)."""
    private = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 3)
    replacement = os.open(diversion, os.O_RDWR) if diversion else os.dup(2)
    os.dup2(replacement, fd)
    os.close(replacement)
    try:
        yield private
    finally:
        os.dup2(private, fd)
        os.close(private)


async def _read_lines(fd: int, reads: ObjectSendStream[SessionMessage | Exception], drain: Drain) -> None:
    # epoll cannot watch a file or the null device; reading one never blocks.
    pollable = not stat.S_ISREG(os.fstat(fd).st_mode)
    buffer = b""
    async with reads:
        while True:
            if pollable:
                try:
                    await anyio.wait_readable(fd)
                except PermissionError:
                    pollable = False
            try:
                chunk = os.read(fd, _CHUNK)  # the descriptor is ready: this returns what is there
            except OSError as exc:
                logger.warning("stdin is unreadable; treating it as closed", errorMessage=str(exc))
                return
            if not chunk:
                return
            *lines, buffer = (buffer + chunk).split(b"\n")
            for line in lines:
                if line.strip():
                    message = _parse(line)
                    if isinstance(message, SessionMessage) and isinstance(message.message, types.JSONRPCRequest):
                        drain.opened(stdio_carrier(message.message.id))
                    await reads.send(message)


def _parse(line: bytes) -> SessionMessage | Exception:
    try:
        return SessionMessage(types.jsonrpc_message_adapter.validate_json(line, by_name=False))
    except Exception as exc:  # the server answers a malformed message with an error; it does not stop
        return exc


async def _write_lines(fd: int, writes: ObjectReceiveStream[SessionMessage], drain: Drain) -> None:
    mode = os.fstat(fd).st_mode
    # A pipe or socket to a slow client would block the loop on a large message: write it without blocking,
    # waiting for room. A terminal or a file is left as it is (its flags are shared with whoever opened it).
    wait = stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)
    if wait:
        os.set_blocking(fd, False)
    try:
        async with writes:
            async for message in writes:
                data = message.message.model_dump_json(by_alias=True, exclude_unset=True) + "\n"
                await _write_all(fd, memoryview(data.encode("utf-8", "replace")), wait)
                if isinstance(message.message, types.JSONRPCResponse | types.JSONRPCError):
                    drain.closed(stdio_carrier(message.message.id))
    finally:
        if wait:
            os.set_blocking(fd, True)  # the flag belongs to the descriptor we restore on fd 1


async def _write_all(fd: int, view: memoryview, wait: bool) -> None:
    while view:
        if wait:
            await anyio.wait_writable(fd)
        try:
            view = view[os.write(fd, view) :]
        except BlockingIOError:
            continue
