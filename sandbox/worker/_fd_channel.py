"""The worker's end of its channel to the host: blocking, on raw file descriptors."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from sandbox.protocol.channel import READ_CHUNK, FrameReader, decode, encode

__all__ = ["FdChannel"]


class FdChannel:
    """The worker's blocking end, on raw file descriptors (no buffered file objects to leak)."""

    def __init__(self, read_fd: int, write_fd: int, max_size: int) -> None:
        self.read_fd = read_fd
        self.write_fd = write_fd
        self.max_size = max_size
        self._reader = FrameReader()

    def send(self, message: Any) -> None:
        data = memoryview(encode(message, self.max_size))
        while data:
            data = data[os.write(self.write_fd, data) :]

    def receive(self, object_hook: Callable[[dict[str, Any]], Any] | None = None) -> Any:
        while missing := self._reader.missing(self.max_size):
            chunk = os.read(self.read_fd, max(missing, READ_CHUNK))
            if not chunk:
                raise EOFError("channel closed")
            self._reader.feed(chunk)
        return decode(self._reader.pop(), object_hook)
