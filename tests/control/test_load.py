"""The control plane at start-up: the stored approvals come back for every server, read in one transaction,
against real mcp-server-time processes and a real SQLite store."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from onetool.config import Config
from onetool.control.server import ServerControl
from onetool.state import ApprovedTool, StateStore
from onetool.upstream import UpstreamPool
from tests.conftest import TIME_SERVER

pytestmark = pytest.mark.anyio


class CountingStore(StateStore):
    """The real store, noting each read of approved tools it is asked for."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.reads: list[str] = []

    async def approved_tools(self, server: str) -> dict[str, ApprovedTool]:
        self.reads.append(f"approved_tools({server})")
        return await super().approved_tools(server)

    async def all_approved_tools(self) -> dict[str, dict[str, ApprovedTool]]:
        self.reads.append("all_approved_tools()")
        return await super().all_approved_tools()


async def test_startup_reads_every_approval_at_once_and_applies_each_to_its_server(tmp_path: Path) -> None:
    time = {"command": TIME_SERVER, "args": ["--local-timezone", "UTC"], "quarantined": True}
    config = Config.model_validate({"servers": {"time": time, "changed": time}})
    store = await CountingStore.open(f"sqlite:///{tmp_path / 'onetool.db'}")
    async with store:
        first = await ServerControl.load(config, store)
        async with UpstreamPool(first.configs()) as pool:
            with anyio.fail_after(30):
                while not all(pool.server_status(name).connected for name in config.servers):
                    await anyio.sleep(0.05)
            await first.attach(pool, lambda: None)
            for name in config.servers:
                await first.approve(name, actor="cli")
            # as if "changed" had been approved when its first tool read differently
            [rewritten, *kept] = pool.tools("changed")
            await store.approve_tools("changed", [rewritten.model_copy(update={"description": "earlier"})], "cli")

            store.reads.clear()
            restarted = await ServerControl.load(config, store)
            assert store.reads == ["all_approved_tools()"]
            await restarted.attach(pool, lambda: None)
            assert restarted.shown("time") == pool.tools("time")
            assert restarted.shown("changed") == kept
            assert [(h.server, h.tool, h.reason) for h in restarted.held()] == [
                ("changed", rewritten.name, "changed after approval")
            ]
