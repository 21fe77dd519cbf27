"""MCP over stdio, one JSON-RPC message per line: the framing both stdio links share (the gateway's stdio face and
its stdio upstreams), as the read and write streams the SDK takes.

A message is read and written in the task that asks for it, not relayed through a memory stream by a task of
ours: a relay costs every message a task switch, which a code-mode gateway pays on every run and every pack call.
Each side supplies only how bytes come and go (:meth:`LineReader._read`, :meth:`LineWriter._write`).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections import deque
from typing import Self

import anyio
import anyio.lowlevel
import mcp.types as types
from mcp.shared.message import SessionMessage

__all__ = ["LineReader", "LineWriter", "parse_line"]


def parse_line(line: bytes) -> SessionMessage:
    """One line as a message; ValueError (pydantic's ValidationError is one) if it is not JSON-RPC."""
    return SessionMessage(types.jsonrpc_message_adapter.validate_json(line, by_name=False))


class LineReader(ABC):
    """A read stream of the messages in the lines its chunks hold; blank lines are skipped, a last line without
    its newline is dropped at the end.

    With ``max_line``, a line longer than that many bytes ends the stream where it starts (:meth:`_overflow`, which
    a side extends to say why): the other side sent more than it may, and a line cannot be skipped without reading
    all of it.
    """

    def __init__(self, max_line: int | None = None) -> None:
        self._partial: list[bytes] = []
        """The pieces of the line under way: joined once, when its newline comes (re-joining them at every chunk
        cost a 10 MB message a third of a second of the loop)."""
        self._partial_size = 0
        self._lines: deque[bytes] = deque()
        self._ended = False
        self._max_line = max_line

    @abstractmethod
    async def _read(self) -> bytes:
        """The next chunk; b"" at the end."""

    @abstractmethod
    def _message(self, line: bytes) -> SessionMessage | Exception | None:
        """What ``receive`` returns for ``line``; None skips it."""

    async def receive(self) -> SessionMessage | Exception:
        fresh = False
        while True:
            while self._lines:
                if not fresh:
                    # A line that came with the one before it: what that one started goes first (the SDK runs a
                    # notification's handler in a task of its own: a progress report before the result it precedes).
                    await anyio.lowlevel.checkpoint()
                fresh = False
                message = self._message(self._lines.popleft())
                if message is not None:
                    return message
            if self._ended:
                raise anyio.EndOfStream
            chunk = await self._read()
            fresh = True
            if not chunk:
                self._ended = True
                continue
            *lines, rest = chunk.split(b"\n")
            if lines:
                lines[0] = b"".join([*self._partial, lines[0]])
                self._partial, self._partial_size = [], 0
            if self._max_line is not None and (
                self._partial_size + len(rest) > self._max_line or any(len(line) > self._max_line for line in lines)
            ):
                self._overflow(lines)
                continue
            self._lines.extend(line for line in lines if line.strip())
            self._partial.append(rest)
            self._partial_size += len(rest)

    def _overflow(self, lines: list[bytes]) -> None:
        """Keep the lines before the first one too long; read nothing more."""
        assert self._max_line is not None
        for line in lines:
            if len(line) > self._max_line:
                break
            if line.strip():
                self._lines.append(line)
        self._partial, self._partial_size = [], 0
        self._ended = True

    def close(self) -> None:
        """No more reading: ``receive`` ends once the lines already read are taken."""
        self._ended = True

    async def aclose(self) -> None:
        self.close()

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> SessionMessage | Exception:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.close()


class LineWriter(ABC):
    """A write stream that puts each message on a line of its own, one message at a time (its writers are the
    tasks sending, so a lock keeps lines whole)."""

    def __init__(self) -> None:
        self._lock = anyio.Lock(fast_acquire=True)
        self._closed = False

    @abstractmethod
    async def _write(self, data: bytes) -> None:
        """Write all of ``data``."""

    async def send(self, message: SessionMessage, /) -> None:
        data = (message.message.model_dump_json(by_alias=True, exclude_unset=True) + "\n").encode("utf-8", "replace")
        async with self._lock:
            if self._closed:
                raise anyio.ClosedResourceError
            await self._write(data)

    async def aclose(self) -> None:
        """No more sending; the owner closes the descriptor."""
        self._closed = True

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
