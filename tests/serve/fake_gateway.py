"""A stand-in for onetool.core.gateway.Gateway with the same shape, for the server tests."""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager

from anyio.abc import ObjectReceiveStream
from mcp.types import CallToolResult, ServerNotification, TextContent

from onetool.broadcast import Broadcast
from onetool.config import Config
from onetool.control import ServerView
from onetool.core.drain import Drain
from onetool.core.relay import RunClient
from onetool.registry import Registry


class FakeGateway:
    """Echoes code; ``fail`` -> is_error, ``boom`` -> raises, ``change`` -> a new description."""

    def __init__(self) -> None:
        self.version = 1
        self._changes: Broadcast[None] = Broadcast(buffer=16)
        self.drain = Drain()
        self.config = Config()
        self.registry = Registry({})
        self.control = NoServers()
        self._notices: Broadcast[tuple[str, ServerNotification]] = Broadcast(buffer=16)

    async def settled(self) -> None:
        """The catalogue is whole from the start."""

    async def roots_changed(self) -> None:
        """No upstreams to tell."""

    def describe_run(self) -> str:
        return f"Run Python code. Catalogue v{self.version}."

    async def run(self, code: str, client: RunClient | None = None, *, face: str = "run") -> CallToolResult:
        if code == "boom":
            raise RuntimeError("kaboom")
        if code == "fail":
            return CallToolResult(content=[TextContent(type="text", text="it failed")], is_error=True)
        if code == "change":
            self.change()
        return CallToolResult(
            content=[TextContent(type="text", text=f"echo: {code}")], structured_content={"result": code}
        )

    def change(self) -> None:
        self.version += 1
        self._changes.publish(None)

    def subscribe(self) -> AbstractAsyncContextManager[ObjectReceiveStream[None]]:
        return self._changes.subscribe()

    def notices(self) -> AbstractAsyncContextManager[ObjectReceiveStream[tuple[str, ServerNotification]]]:
        return self._notices.subscribe()


class NoServers:
    """The control plane of a gateway without upstream servers: no prompts or resources to show."""

    def list(self) -> list[ServerView]:
        return []


# A raw handshake-era initialize request, for tests that speak the wire protocol directly.
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "test", "version": "1"},
    },
}
