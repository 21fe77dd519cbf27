"""Connection limits for the HTTP front: a deadline for each request's headers and body, a cap on connections.

uvicorn 0.54 has no deadline for incomplete requests: its keep-alive timer starts only after a response
and the first byte of a next request cancels it, so a client that sends half a request line holds its
connection (and a file descriptor) forever. Its ``limit_concurrency`` does not help either: it answers
503 only once headers are complete, and it counts the stalled connections, so it would turn real clients
away while stalled ones hold the slots. Hence this h11 protocol, which uvicorn runs for every connection:

- a connection waiting for a request (new, or idle after a response) must deliver the complete headers
  within ``header_timeout`` of starting to wait, however it drips them; a request body must arrive
  within ``body_timeout`` of its headers. Responses are not limited: an open SSE stream (a
  handshake-era client's GET, a 2026-era listen) has a complete request and stays open.
- past ``max_connections`` open connections, the one that has waited longest for a request is closed
  to make room; when every connection is in the middle of a request, the newcomer is closed instead.
  The cap stays well below the file-descriptor limit, and connections are accepted in small batches, so
  stalled connections cannot exhaust descriptors and lock out new clients (asyncio stops accepting for a
  second after EMFILE).
- with TLS, the protocol runs the handshake itself on the accepted TCP connection (``loop.start_tls``), so a
  connection counts and has its header deadline from the accept, handshake included. Given to asyncio's
  server instead, TLS would hide a connection from the protocol until its handshake ended: one that never
  sends a ClientHello would hold a descriptor for 60 s, uncounted.
"""

from __future__ import annotations

import asyncio
import resource
import ssl
from dataclasses import dataclass
from typing import Any, ClassVar

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

from onetool.logs import logger

# Connections accepted per event-loop tick. Each batch holds descriptors until the loop has run the new
# connections' callbacks, which close the ones over the cap; the cap leaves room for a few batches.
ACCEPT_BATCH = 16

# Without an explicit cap, at most this many connections, and never more than half the open-file limit:
# the rest is for upstream connections, sandbox workers and logs.
_DEFAULT_MAX_CONNECTIONS = 1024


@dataclass(frozen=True)
class HttpLimits:
    header_timeout: float = 10.0
    """Seconds a connection may take to send a request's headers, from when it starts waiting for one."""
    body_timeout: float = 30.0
    """Seconds a request may take to send its body, from the end of its headers."""
    max_connections: int | None = None
    """Open connections at most; None: 1024, or half the soft RLIMIT_NOFILE when that is lower."""

    def connection_cap(self) -> int:
        if self.max_connections is not None:
            return self.max_connections
        soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
        if soft == resource.RLIM_INFINITY:
            return _DEFAULT_MAX_CONNECTIONS
        return max(1, min(_DEFAULT_MAX_CONNECTIONS, soft // 2))


DEFAULT_LIMITS = HttpLimits()


class _Gate:
    """Counts one server's open connections and knows which ones wait for a request, oldest first."""

    def __init__(self, limits: HttpLimits) -> None:
        self.limits = limits
        self._cap = limits.connection_cap()
        self._open = 0
        self._waiting: dict[_LimitedH11, None] = {}  # insertion-ordered: the longest-waiting first

    def opened(self, connection: _LimitedH11) -> None:
        self._open += 1
        if self._open > self._cap:
            # The newcomer is waiting too, last in line: it is closed only when no one else waits.
            victim = next(iter(self._waiting), connection)
            logger.debug("HTTP connection limit reached: closing the connection that waited longest", cap=self._cap)
            victim.close_waiting()

    def closed(self, connection: _LimitedH11) -> None:
        self._open -= 1
        self._waiting.pop(connection, None)

    def waiting(self, connection: _LimitedH11, waits: bool) -> None:
        if waits:
            self._waiting[connection] = None
        else:
            self._waiting.pop(connection, None)


class _LimitedH11(H11Protocol):
    _gate: ClassVar[_Gate]
    _tls: ClassVar[ssl.SSLContext | None]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._deadline: asyncio.TimerHandle | None = None
        self._phase: object = None  # the client's h11 state the deadline was set for
        self._handshaking = False
        self._handshake: asyncio.Task[None] | None = None  # held: the loop keeps tasks only by weak reference
        self._early = bytearray()  # what TLS decrypted before the handshake task resumed

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        if self._tls is None:
            super().connection_made(transport)
        else:
            # Until the handshake ends, the TCP transport is the one the deadline and the cap close.
            self.transport = transport
            self._handshaking = True
        self._watch()
        self._gate.opened(self)
        if self._tls is not None and not transport.is_closing():
            # Not a task nobody watches: _handshake_tls handles its own failures (they are the client's).
            self._handshake = self.loop.create_task(self._handshake_tls(transport, self._tls))

    async def _handshake_tls(self, tcp: asyncio.Transport, context: ssl.SSLContext) -> None:
        if tcp.is_closing():  # closed for the cap before this task ran: start_tls would adopt a dead transport
            return
        try:
            tls = await self.loop.start_tls(tcp, self, context, server_side=True)
        except OSError as e:  # ssl.SSLError, a reset, a timeout
            logger.debug("TLS handshake failed: {}", type(e).__name__)
            tcp.close()
            return
        if tls is None or tls.is_closing():  # closed by the deadline or the cap as the handshake ended
            return
        super().connection_made(tls)
        self._handshaking = False
        early, self._early = bytes(self._early), bytearray()
        if early:
            self.data_received(early)

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_deadline()
        self._gate.closed(self)
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self._handshaking:
            # asyncio's TLS layer hands over what came with the end of the handshake before start_tls returns.
            self._early += data
            return
        super().data_received(data)
        self._watch()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._watch()

    def close_waiting(self) -> None:
        self._gate.waiting(self, False)
        self.transport.close()

    def _watch(self) -> None:
        """Set the deadline for what the client owes now; it does not move while the client's state holds."""
        phase = self.conn.their_state
        if phase is self._phase or self.transport.is_closing():
            return
        self._phase = phase
        self._cancel_deadline()
        self._gate.waiting(self, phase is h11.IDLE)
        limits = self._gate.limits
        timeout = {h11.IDLE: limits.header_timeout, h11.SEND_BODY: limits.body_timeout}.get(phase)
        if timeout is not None:
            self._deadline = self.loop.call_later(timeout, self._expire, phase)

    def _expire(self, phase: object) -> None:
        self._deadline = None
        if self.conn.their_state is phase and not self.transport.is_closing():
            what = "headers" if phase is h11.IDLE else "body"
            logger.debug(f"closing an HTTP connection that did not send its request {what} in time")
            self.close_waiting()

    def _cancel_deadline(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None


def limited_protocol(limits: HttpLimits, tls: ssl.SSLContext | None = None) -> type[asyncio.Protocol]:
    """An h11 protocol class for one uvicorn server (uvicorn.Config(http=...)): its connections share a cap; with
    ``tls``, each one is a TLS connection (uvicorn's own ``ssl`` stays unset)."""

    class LimitedH11(_LimitedH11):
        _gate = _Gate(limits)
        _tls = tls

    return LimitedH11
