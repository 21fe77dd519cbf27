"""What the HTTP transports share: the plain-http warning, loggable URLs, the HTTP client, the statuses it saw,
what a refused certificate means."""

from __future__ import annotations

import ssl
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import httpx2

from onetool.auth.traffic import OAUTH_REQUEST
from onetool.config import ServerConfig
from onetool.hosts import plain_http_host
from onetool.logs import logger, trace_context

SSE_READ_TIMEOUT = 300.0  # a quiet SSE stream is normal; calls have their own timeout


def warn_plain_http(name: str, config: ServerConfig) -> None:
    """A WARNING naming the server and host when it is reached over plain http across a network: only a config
    with ``allow_http: true`` gets that far (the config refuses it otherwise)."""
    host = plain_http_host(config.url) if config.url else None
    if host is not None:
        logger.bind(server=name, host=host).warning(
            "server '{}' is reached over plain http at {} (allow_http: true): tokens and data travel unencrypted",
            name,
            host,
        )


TRUST_FIX = (
    "trust the CA that signed it: add it to this machine's CA store, or set SSL_CERT_FILE to a PEM file with it "
    "(that file then replaces the system's CAs for OneTool)"
)
"""What to do about a certificate the gateway does not trust (httpx2 reads ``SSL_CERT_FILE`` and ``SSL_CERT_DIR``)."""


def untrusted_certificate(error: BaseException) -> str | None:
    """Why TLS verification refused the server's certificate ("self-signed certificate in certificate chain",
    "Hostname mismatch ..."), when that is what ``error`` (an httpx2 error) comes from; else None."""
    seen: set[int] = set()
    cause: BaseException | None = error
    while cause is not None and id(cause) not in seen:
        if isinstance(cause, ssl.SSLCertVerificationError):
            return cause.verify_message or cause.reason or "certificate verify failed"
        seen.add(id(cause))
        cause = cause.__cause__ or cause.__context__
    return None


class HttpStatuses:
    """Records the HTTP status of every response, so a failed connect can say why (401, 404 ...)."""

    def __init__(self) -> None:
        self.codes: list[int] = []

    async def __call__(self, response: httpx2.Response) -> None:
        if not response.request.extensions.get(OAUTH_REQUEST):  # discovery 404s say nothing about MCP
            self.codes.append(response.status_code)

    def refused(self) -> bool:
        """The endpoint does not speak streamable HTTP (try SSE)."""
        return any(code in (404, 405) for code in self.codes)

    def failed(self) -> int | None:
        """The last error status (400 and up), if any."""
        return next((code for code in reversed(self.codes) if code >= 400), None)


def http_reason(code: int) -> str:
    return f"HTTP {code} {httpx2.codes.get_reason_phrase(code)}".rstrip()


async def _traced(request: httpx2.Request) -> None:
    # The SDK sends each request from a task in its sender's context: the current span is the call's own.
    trace_context(request.headers)


class MessageTooLong(httpx2.StreamError):
    """A JSON response past the server's cap: the SDK fails the one request it answers."""


class _Capped(httpx2.AsyncByteStream):
    """A response body that stops at ``limit`` bytes: the SDK reads a JSON answer whole before parsing it."""

    def __init__(self, inner: httpx2.AsyncByteStream, limit: int, refusal: str) -> None:
        self._inner = inner
        self._limit = limit
        self._refusal = refusal

    async def __aiter__(self) -> AsyncIterator[bytes]:
        size = 0
        async for chunk in self._inner:
            size += len(chunk)
            if size > self._limit:
                raise MessageTooLong(self._refusal)
            yield chunk

    async def aclose(self) -> None:
        await self._inner.aclose()


def _capping(limit: int, refusal: str) -> Callable[[httpx2.Response], Awaitable[None]]:
    """A response hook that caps each JSON body at ``limit`` bytes (the SDK caps each event of an SSE body itself,
    at what the transport passes it)."""
    refusal = f"the server {refusal}"

    async def cap(response: httpx2.Response) -> None:
        if response.headers.get("content-type", "").lower().startswith("application/json"):
            assert isinstance(response.stream, httpx2.AsyncByteStream)
            response.stream = _Capped(response.stream, limit, refusal)

    return cap


def http_client_factory(
    config: ServerConfig, statuses: HttpStatuses, refusal: str, oauth: httpx2.Auth | None = None
) -> Callable[..., httpx2.AsyncClient]:
    """Builds HTTP clients that send the server's headers on every request, and the trace context of the call it
    is for (``traceparent``, when traces are on), record statuses, cap each JSON answer at the server's
    ``max_message_mb`` (``refusal`` says so), and authenticate with ``auth`` (the server's OAuth provider) unless
    the transport passes its own."""
    capping = _capping(config.max_message_bytes, refusal)

    def factory(
        headers: dict[str, str] | None = None, timeout: httpx2.Timeout | None = None, auth: Any = None
    ) -> httpx2.AsyncClient:
        return httpx2.AsyncClient(
            headers={**config.headers, **(headers or {})},
            timeout=timeout or httpx2.Timeout(config.connect_timeout, read=SSE_READ_TIMEOUT),
            auth=auth or oauth,
            follow_redirects=True,
            event_hooks={"request": [_traced], "response": [statuses, capping]},
        )

    return factory
