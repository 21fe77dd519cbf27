"""The streamable HTTP transport (``type: http``, the default for a ``url``): the SDK's client on our HTTP client."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from mcp.client.streamable_http import streamable_http_client

from onetool.upstream.transports._base import Link, Streams
from onetool.upstream.transports._http import HttpStatuses, http_client_factory


@asynccontextmanager
async def open_streamable_http(link: Link) -> AsyncIterator[Streams]:
    """Yield the streams of a streamable HTTP session at ``link.url``; ``link.statuses`` records each answer."""
    assert link.url is not None
    statuses = link.statuses = HttpStatuses()
    async with (
        http_client_factory(link.config, statuses, link.too_long, link.auth)() as http,
        streamable_http_client(link.url, http_client=http, max_sse_event_size=link.config.max_message_bytes) as streams,
    ):
        yield streams
