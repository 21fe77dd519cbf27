"""Length-prefixed JSON frames between host and worker: one framing for both ends.

A frame is a 4-byte big-endian length and that many bytes of ASCII JSON. Only JSON crosses, never
pickle, so a hostile worker can at worst send data the host refuses. `FrameReader` cuts frames out of
whatever bytes a transport read; each side's end of the channel uses it: the worker's blocking `FdChannel`
(sandbox/worker/_fd_channel.py) and the host's non-blocking `SocketChannel` (sandbox/host/_socket_channel.py,
on anyio, which the fork-server never imports).
"""

from __future__ import annotations

import json
import struct
from collections.abc import Callable
from typing import Any

__all__ = ["HEADER", "JOB_CAP", "READ_CHUNK", "FrameReader", "ProtocolError", "decode", "encode"]

HEADER = struct.Struct(">I")

JOB_CAP = 1 << 30
"""A job comes from the trusted host and is bounded by the code it carries; both ends use this cap."""

READ_CHUNK = 1 << 16
"""Bytes asked of the transport at least, so a small frame usually arrives in one read."""


class ProtocolError(Exception):
    """The other side sent something that is not a well-formed frame within the size cap."""


_ENCODER = json.JSONEncoder(separators=(",", ":"))
"""json.dumps with any option builds a new encoder per call; this one is built once."""


def encode(message: Any, max_size: int) -> bytes:
    body = _ENCODER.encode(message).encode("ascii")
    if len(body) > max_size:
        raise ProtocolError(f"message of {len(body)} bytes exceeds the {max_size} byte cap")
    return HEADER.pack(len(body)) + body


def decode(body: bytes, object_hook: Callable[[dict[str, Any]], Any] | None = None) -> Any:
    """A frame from the trusted host; the host decodes the worker's frames with sandbox/host/_untrusted.py.
    `object_hook` makes each JSON object (as json.loads does)."""
    try:
        return json.loads(body, object_hook=object_hook)
    except (ValueError, RecursionError) as exc:
        raise ProtocolError(f"malformed message: {exc}") from None


class FrameReader:
    """Cuts frame bodies out of a byte stream; it never reads, its owner feeds it what the transport gave."""

    def __init__(self) -> None:
        self._buffer = bytearray()

    def missing(self, max_size: int) -> int:
        """Bytes still to feed before `pop` has a frame; 0 when one is complete. A header announcing more
        than `max_size` is refused before any of its body is read."""
        buffer = self._buffer
        if len(buffer) < HEADER.size:
            return HEADER.size - len(buffer)
        size: int = HEADER.unpack_from(buffer)[0]
        if size > max_size:
            raise ProtocolError(f"message of {size} bytes exceeds the {max_size} byte cap")
        return max(0, HEADER.size + size - len(buffer))

    def feed(self, data: bytes) -> None:
        self._buffer += data

    def pop(self) -> bytes:
        """The complete frame at the front (call only once `missing` said 0)."""
        (size,) = HEADER.unpack_from(self._buffer)
        end = HEADER.size + size
        body = bytes(self._buffer[HEADER.size : end])
        del self._buffer[:end]
        return body
