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
from mcp.server import Server
from mcp.shared.message import SessionMessage

from onetool.core.drain import Drain
from onetool.logs import logger
from onetool.serve._drain_guard import stdio_carrier
from onetool.stdio_lines import LineReader, LineWriter, parse_line

_CHUNK = 1 << 16


async def serve_stdio(server: Server[Any], drain: Drain | None = None) -> None:
    """Serve ``server`` (one face) on stdin/stdout until stdin reaches EOF or the caller cancels; ``drain``: the
    gateway's, told when each request arrives and when its answer is written."""
    drain = drain or Drain()
    with _claimed(0, os.devnull) as wire_in, _claimed(1, None) as wire_out, _StdoutWriter(wire_out, drain) as writer:
        logger.info("serving MCP over stdio")
        await server.run(_StdinReader(wire_in, drain), writer, server.create_initialization_options())
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


class _StdinReader(LineReader):
    """stdin; it ends at EOF, or when reading fails. Each request read is reported to the drain."""

    def __init__(self, fd: int, drain: Drain) -> None:
        super().__init__()
        self._fd = fd
        self._drain = drain
        # epoll cannot watch a file or the null device; reading one never blocks.
        self._pollable = not stat.S_ISREG(os.fstat(fd).st_mode)

    async def _read(self) -> bytes:
        if self._pollable:
            try:
                await anyio.wait_readable(self._fd)
            except PermissionError:
                self._pollable = False
        try:
            return os.read(self._fd, _CHUNK)  # the descriptor is ready: this returns what is there
        except OSError as exc:
            logger.warning("stdin is unreadable; treating it as closed", errorMessage=str(exc))
            return b""

    def _message(self, line: bytes) -> SessionMessage | Exception:
        try:
            message = parse_line(line)
        except Exception as exc:  # the server answers a malformed message with an error; it does not stop
            return exc
        if isinstance(message.message, types.JSONRPCRequest):
            self._drain.opened(stdio_carrier(message.message.id))
        return message


class _StdoutWriter(LineWriter):
    """stdout; each answer is reported to the drain once written.

    A pipe or socket to a slow client would block the loop on a large message: it is written without blocking,
    waiting for room. A terminal or a file is left as it is (its flags are shared with whoever opened it); the
    flag is restored on exit (it belongs to the descriptor we restore on fd 1)."""

    def __init__(self, fd: int, drain: Drain) -> None:
        super().__init__()
        self._fd = fd
        self._drain = drain
        mode = os.fstat(fd).st_mode
        self._wait = stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)

    def __enter__(self) -> _StdoutWriter:
        if self._wait:
            os.set_blocking(self._fd, False)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._wait:
            os.set_blocking(self._fd, True)

    async def send(self, message: SessionMessage, /) -> None:
        try:
            await super().send(message)
        finally:  # written, or never to be (the client is gone): either way the drain waits no more for it
            if isinstance(message.message, types.JSONRPCResponse | types.JSONRPCError):
                self._drain.closed(stdio_carrier(message.message.id))

    async def _write(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            try:
                view = view[os.write(self._fd, view) :]
            except BlockingIOError:
                await anyio.wait_writable(self._fd)  # only when the pipe is full: a ready one costs no trip round
