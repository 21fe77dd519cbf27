"""MCP clients of both protocol eras on one URL, each recording when it heard notifications/tools/list_changed."""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import anyio
from mcp import Client

__all__ = ["EraClients", "ListChanged", "era_clients"]


class ListChanged:
    """When one client heard notifications/tools/list_changed (perf_counter times)."""

    def __init__(self) -> None:
        self._send, self._receive = anyio.create_memory_object_stream[float](100)

    def close(self) -> None:
        self._send.close()
        self._receive.close()

    def heard(self) -> None:
        self._send.send_nowait(time.perf_counter())

    def drain(self) -> None:
        with contextlib.suppress(anyio.WouldBlock):
            while True:
                self._receive.receive_nowait()

    async def next(self, timeout: float = 10) -> float:
        with anyio.fail_after(timeout):
            return await self._receive.receive()


@dataclass(frozen=True)
class EraClients:
    legacy: Client
    modern: Client
    heard: dict[str, ListChanged]

    def drain(self) -> None:
        for one in self.heard.values():
            one.drain()

    async def both_heard(self) -> None:
        """Each era's client heard the next list_changed (how soon is measured by `make bench`, not here)."""
        for one in self.heard.values():
            await one.next()


@contextlib.asynccontextmanager
async def era_clients(url: str) -> AsyncIterator[EraClients]:
    """A handshake-era and a 2026-era client on ``url``, each recording the list_changed it hears."""
    heard = {"legacy": ListChanged(), "modern": ListChanged()}

    async def on_message(message: Any) -> None:
        if getattr(message, "method", "") == "notifications/tools/list_changed":
            heard["legacy"].heard()

    async with (
        Client(url, mode="legacy", message_handler=on_message, read_timeout_seconds=60) as legacy,
        Client(url, read_timeout_seconds=60) as modern,
        modern.listen(tools_list_changed=True) as events,
        anyio.create_task_group() as tg,
    ):

        async def pump() -> None:
            async for _ in events:
                heard["modern"].heard()

        tg.start_soon(pump)
        try:
            yield EraClients(legacy, modern, heard)
        finally:
            tg.cancel_scope.cancel()
            for one in heard.values():
                one.close()
