"""What the faces use of the gateway, as Protocols: each face depends on the few services it names here, not on
the :class:`~onetool.core.gateway.Gateway` and its attributes, so it can be read, and built in a test, alone.

``FaceHost`` is what every MCP face's server needs (:func:`onetool.serve.fanout.face_server`, the upstreams'
prompts and resources); ``RunHost`` adds a run (the ``run`` face, and ``/mcp/direct``'s ``run``); ``CallHost``
adds one tool call through the call path and the tool index (``exec``, ``/mcp/direct``). The gateway is all of
them; mypy checks that where a face is built.
"""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from anyio.abc import ObjectReceiveStream
    from mcp import types

    from onetool.config import Config
    from onetool.core.calls import Calls
    from onetool.core.drain import Drain
    from onetool.core.relay import Relay, RunClient
    from onetool.registry import Registry
    from onetool.search import ToolIndex
    from onetool.upstream import UpstreamPool

__all__ = ["CallHost", "FaceHost", "RunHost"]


class FaceHost(Protocol):
    """What every MCP face's server needs of the gateway."""

    drain: Drain

    @property
    def config(self) -> Config: ...

    @property
    def registry(self) -> Registry: ...

    @property
    def pool(self) -> UpstreamPool: ...

    def subscribe(self) -> AbstractAsyncContextManager[ObjectReceiveStream[None]]: ...

    def notices(self) -> AbstractAsyncContextManager[ObjectReceiveStream[tuple[str, types.ServerNotification]]]: ...

    async def settled(self) -> None: ...

    async def roots_changed(self) -> None: ...


class RunHost(FaceHost, Protocol):
    """A face that runs snippets."""

    def describe_run(self) -> str: ...

    async def run(self, code: str, client: RunClient | None = None, *, face: str = "run") -> types.CallToolResult: ...


class CallHost(FaceHost, Protocol):
    """A face that calls one tool at a time through the call path, and searches the tool index."""

    calls: Calls
    index: ToolIndex

    def relay(self, client: RunClient | None) -> AbstractAsyncContextManager[Relay | None]: ...
