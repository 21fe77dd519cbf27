"""Helpers for the server tests: an HTTP server on a free loopback port, run in the test's task group."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio

from onetool.server import serve_http


@asynccontextmanager
async def running_http(gateway: Any, **kwargs: Any) -> AsyncIterator[str]:
    """serve_http on port 0; yields the URL on_ready reported, cancels the server on exit."""
    urls: list[str] = []
    ready = anyio.Event()

    def on_ready(url: str) -> None:
        urls.append(url)
        ready.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(lambda: serve_http(gateway, on_ready=on_ready, **kwargs))
        with anyio.fail_after(10):
            await ready.wait()
        yield urls[0]
        tg.cancel_scope.cancel()
