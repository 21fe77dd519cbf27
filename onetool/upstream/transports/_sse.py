"""The SSE transport (``type: sse``, and streamable HTTP's fallback): the SDK's client, building our HTTP clients."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from mcp.client.sse import sse_client

from onetool.upstream.transports._base import Link, Streams
from onetool.upstream.transports._http import SSE_READ_TIMEOUT, HttpStatuses, http_client_factory


@asynccontextmanager
async def open_sse(link: Link) -> AsyncIterator[Streams]:
    """Yield the streams of an SSE session at ``link.url``; ``link.statuses`` records each answer."""
    assert link.url is not None
    statuses = link.statuses = HttpStatuses()
    async with sse_client(
        link.url,
        timeout=link.config.connect_timeout,
        sse_read_timeout=SSE_READ_TIMEOUT,
        httpx_client_factory=http_client_factory(link.config, statuses, link.too_long, link.auth),
    ) as streams:
        yield streams
