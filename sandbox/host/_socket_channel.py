"""The host's end of a worker's channel: a non-blocking socket, read and written directly from the event loop."""

from __future__ import annotations

import socket

import anyio

from sandbox.protocol.channel import READ_CHUNK, FrameReader

__all__ = ["SocketChannel"]


class SocketChannel:
    """Frames go out whole and come in as undecoded bodies: what a worker sent is decoded by the caller,
    which knows how far to trust it and may decode a large frame off the event loop."""

    def __init__(self, sock: socket.socket) -> None:
        sock.setblocking(False)
        self.sock = sock
        self._reader = FrameReader()
        self._closed = False
        # Pack-call replies are sent from concurrent tasks; frames must not interleave.
        self._send_lock = anyio.Lock(fast_acquire=True)

    async def send_frame(self, frame: bytes) -> None:
        async with self._send_lock:
            view = memoryview(frame)
            while view:
                self._check_open()
                try:
                    view = view[self.sock.send(view) :]
                except BlockingIOError:
                    await anyio.wait_writable(self.sock)

    async def receive_frame(self, max_size: int) -> bytes:
        while missing := self._reader.missing(max_size):
            self._check_open()
            try:
                chunk = self.sock.recv(max(missing, READ_CHUNK))
            except BlockingIOError:
                await anyio.wait_readable(self.sock)
                continue
            if not chunk:
                raise anyio.EndOfStream
            self._reader.feed(chunk)
        return self._reader.pop()

    def close(self) -> None:
        self._closed = True
        anyio.notify_closing(self.sock)
        self.sock.close()

    def _check_open(self) -> None:
        """A task woken after another closed the socket must not touch its (maybe reused) descriptor number."""
        if self._closed:
            raise anyio.ClosedResourceError
