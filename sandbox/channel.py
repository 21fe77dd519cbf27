"""Length-prefixed JSON frames between host and worker.

A frame is a 4-byte big-endian length and that many bytes of ASCII JSON. Only JSON crosses, never
pickle, so a hostile worker can at worst send data the host refuses.
"""

from __future__ import annotations

import json
import os
import struct
from typing import Any

HEADER = struct.Struct(">I")

JOB_CAP = 1 << 30
"""A job comes from the trusted host and is bounded by the code it carries; both ends use this cap."""


class ProtocolError(Exception):
    """The other side sent something that is not a well-formed frame within the size cap."""


_ENCODER = json.JSONEncoder(separators=(",", ":"))
"""json.dumps with any option builds a new encoder per call; this one is built once."""


def encode(message: Any, max_size: int) -> bytes:
    body = _ENCODER.encode(message).encode("ascii")
    if len(body) > max_size:
        raise ProtocolError(f"message of {len(body)} bytes exceeds the {max_size} byte cap")
    return HEADER.pack(len(body)) + body


def decode(body: bytes) -> Any:
    try:
        return json.loads(body)
    except (ValueError, RecursionError) as exc:
        raise ProtocolError(f"malformed message: {exc}") from None


def check_size(size: int, max_size: int) -> None:
    if size > max_size:
        raise ProtocolError(f"message of {size} bytes exceeds the {max_size} byte cap")


class FdChannel:
    """The worker's blocking end, on raw file descriptors (no buffered file objects to leak)."""

    def __init__(self, read_fd: int, write_fd: int, max_size: int) -> None:
        self.read_fd = read_fd
        self.write_fd = write_fd
        self.max_size = max_size

    def send(self, message: Any) -> None:
        data = memoryview(encode(message, self.max_size))
        while data:
            data = data[os.write(self.write_fd, data) :]

    def receive(self) -> Any:
        (size,) = HEADER.unpack(self._read_exactly(HEADER.size))
        check_size(size, self.max_size)
        return decode(self._read_exactly(size))

    def _read_exactly(self, size: int) -> bytes:
        chunks: list[bytes] = []
        while size:
            chunk = os.read(self.read_fd, min(size, 1 << 20))
            if not chunk:
                raise EOFError("channel closed")
            chunks.append(chunk)
            size -= len(chunk)
        return b"".join(chunks)
