"""``GET /runtime/tools.py``: the typed module of every pack (:mod:`onetool.stubs`), for type-checking snippets.

``?filter=github,myserver__echo`` selects packs and single tools. At start it is answered once the catalogue has
settled (:mod:`onetool.core.startup`). The text is cached per filter for the registry
it was made from; the gateway builds a new registry whenever an upstream's catalogue or status changes, so the
first request after a change gets a fresh module and an unchanged catalogue is never rendered twice. Guarded
like ``/mcp``: the bearer token when the listener has one; Host and Origin as every route (``http.HostGuard``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

import anyio.to_thread
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from onetool.registry import Registry
from onetool.serve.http import BearerGuard, Listener, Routes
from onetool.stubs import parse_filter, tools_module

PATH = "/runtime/tools.py"
MEDIA_TYPE = "text/x-python; charset=utf-8"
_MAX_CACHED = 64
"""Filters kept per registry: clients choose filters, so the cache must not grow with them."""
_MAX_FILTER_CHARS = 10_000


def filter_too_long(raw: str | None) -> str | None:
    """Why a ``filter`` of the module is refused (a client chooses it), or None."""
    if raw is not None and len(raw) > _MAX_FILTER_CHARS:
        return f"filter is {len(raw):,} characters; at most {_MAX_FILTER_CHARS:,}: name fewer servers and tools"
    return None


class ToolsModuleCache:
    """The module text per filter, for the current registry only."""

    def __init__(self, registry: Callable[[], Registry]) -> None:
        self._registry = registry
        self._made_from: Registry | None = None
        self._texts: dict[tuple[str, ...] | None, str] = {}

    async def text(self, names: Sequence[str] | None) -> str:
        registry = self._registry()
        if registry is not self._made_from:
            self._made_from, self._texts = registry, {}
        key = tuple(names) if names is not None else None
        text = self._texts.get(key)
        if text is None:
            # Hundreds of tools take milliseconds to render: off the event loop, which serves every run.
            text = await anyio.to_thread.run_sync(tools_module, registry, names)
            if registry is self._made_from:
                if len(self._texts) >= _MAX_CACHED:
                    del self._texts[next(iter(self._texts))]
                self._texts[key] = text
        return text


def tools_module_routes(
    registry: Callable[[], Registry], listener: Listener, settled: Callable[[], Awaitable[None]] | None = None
) -> Routes:
    """``settled()``: returns once the catalogue has settled (``Gateway.settled``); the module waits for it."""
    app: ASGIApp = _ModuleApp(ToolsModuleCache(registry), settled)
    if listener.token:
        app = BearerGuard(app, listener.token)
    return Routes([Route(PATH, endpoint=app, methods=["GET"])])


class _ModuleApp:
    """An ASGI app (a function endpoint would be taken for a request handler, and the guards wrap ASGI apps)."""

    def __init__(self, cache: ToolsModuleCache, settled: Callable[[], Awaitable[None]] | None) -> None:
        self._cache = cache
        self._settled = settled

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        response = await self._module(Request(scope, receive))
        await response(scope, receive, send)

    async def _module(self, request: Request) -> Response:
        raw = request.query_params.get("filter")
        if (too_long := filter_too_long(raw)) is not None:
            return PlainTextResponse(too_long, status_code=400)
        if self._settled is not None:
            await self._settled()
        return Response(await self._cache.text(parse_filter(raw)), media_type=MEDIA_TYPE)
