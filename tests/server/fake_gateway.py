"""A stand-in for onetool.gateway.Gateway with the same shape, for the server tests."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
from anyio.abc import ObjectReceiveStream
from anyio.streams.memory import MemoryObjectSendStream
from mcp.types import CallToolResult, TextContent


class FakeGateway:
    """Echoes code; ``fail`` -> is_error, ``boom`` -> raises, ``change`` -> a new description."""

    def __init__(self) -> None:
        self.version = 1
        self._subscribers: list[MemoryObjectSendStream[None]] = []

    def describe_run(self) -> str:
        return f"Run Python code. Catalogue v{self.version}."

    async def run(self, code: str) -> CallToolResult:
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
        for send in self._subscribers:
            send.send_nowait(None)

    @asynccontextmanager
    async def subscribe(self) -> AsyncIterator[ObjectReceiveStream[None]]:
        send, receive = anyio.create_memory_object_stream[None](16)
        self._subscribers.append(send)
        try:
            async with receive:
                yield receive
        finally:
            self._subscribers.remove(send)
            send.close()
