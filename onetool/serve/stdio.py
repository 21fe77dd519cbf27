"""MCP over stdio: the stdin pump and serve_stdio.

stdout is the protocol channel; nothing else may be written there while we serve.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import AsyncIterator
from typing import Any, TextIO

import anyio
import anyio.from_thread
import anyio.lowlevel
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.server import Server
from mcp.server.stdio import stdio_server

from onetool.logs import logger

__all__ = ["serve_stdio"]


def _pump_lines(wire: TextIO, send: MemoryObjectSendStream[str], token: anyio.lowlevel.EventLoopToken) -> None:
    try:
        for line in wire:
            anyio.from_thread.run(send.send, line, token=token)
    except (anyio.BrokenResourceError, anyio.ClosedResourceError, anyio.RunFinishedError):
        return  # serving ended first: nobody wants the rest of stdin
    except OSError as exc:
        logger.warning("stdin is unreadable; treating it as closed", errorMessage=str(exc))
    with contextlib.suppress(anyio.RunFinishedError):
        anyio.from_thread.run_sync(send.close, token=token)


@contextlib.asynccontextmanager
async def _stdin_lines() -> AsyncIterator[MemoryObjectReceiveStream[str]]:
    """stdin as an async stream of lines, read by a daemon thread.

    The SDK reads stdin on an AnyIO worker thread, and cancellation waits for that thread: a SIGTERM
    while the client keeps stdin open would hang shutdown until the next line arrives. A daemon thread
    blocked in read() holds up neither cancellation nor interpreter exit. Like the SDK, fd 0 points at
    the null device while we serve, so child processes never read protocol bytes.
    """
    wire = os.fdopen(os.dup(0), encoding="utf-8", errors="replace")
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    send, receive = anyio.create_memory_object_stream[str](0)
    reader = threading.Thread(
        target=_pump_lines, args=(wire, send, anyio.lowlevel.current_token()), name="stdin", daemon=True
    )
    reader.start()
    try:
        async with receive:
            yield receive
    finally:
        os.dup2(wire.fileno(), 0)
        # A reader still blocked in read() keeps its file; closing it under the thread is unsafe.
        if not reader.is_alive():
            wire.close()


async def serve_stdio(server: Server[Any]) -> None:
    """Serve ``server`` (one face) on stdin/stdout until stdin reaches EOF or the caller cancels."""
    # stdio_server only iterates stdin, so a stream of lines stands in for its AsyncFile.
    async with (
        _stdin_lines() as lines,
        stdio_server(stdin=lines) as (read_stream, write_stream),  # type: ignore[arg-type]
    ):
        logger.info("serving MCP over stdio")
        await server.run(read_stream, write_stream, server.create_initialization_options())
    logger.info("stdio server done")
