"""The control plane at start-up: the stored approvals come back for every server, read in one transaction,
against real mcp-server-time processes and a real SQLite store."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from onetool.config import Config
from onetool.config.served import Served
from onetool.control._server import ServerControl
from onetool.upstream import UpstreamPool
from tests.conftest import TIME_SERVER
from tests.state.conftest import RecordingStore

pytestmark = pytest.mark.anyio


async def test_startup_reads_every_approval_at_once_and_applies_each_to_its_server(tmp_path: Path) -> None:
    time = {"command": TIME_SERVER, "args": ["--local-timezone", "UTC"], "quarantined": True}
    config = Config.model_validate({"servers": {"time": time, "changed": time}})
    store = await RecordingStore.open(f"sqlite:///{tmp_path / 'onetool.db'}")
    async with store:
        first = await ServerControl.load(Served(config), store)
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

            store.transactions.clear()
            restarted = await ServerControl.load(Served(config), store)
            assert store.transactions == [
                "read the servers' state",  # added servers, overrides, every server's approved tools: at once
                "read the converted servers",
            ]
            await restarted.attach(pool, lambda: None)
            assert restarted.shown("time") == pool.tools("time")
            assert restarted.shown("changed") == kept
            assert [(h.server, h.tool, h.reason) for h in restarted.held()] == [
                ("changed", rewritten.name, "changed after approval")
            ]
