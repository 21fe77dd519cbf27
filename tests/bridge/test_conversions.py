"""The gateway's conversions against real bridge processes: convert, revert, and re-registration after a restart."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from onetool.bridge.client import BridgeClient
from onetool.bridge.conversions import Conversions
from onetool.config import ServerConfig
from onetool.state import StateStore
from onetool.upstream import UpstreamPool
from tests.bridge.conftest import TOKEN, BridgeProcess
from tests.conftest import TIME_SERVER, free_port

pytestmark = pytest.mark.anyio
TIME = ServerConfig(command=TIME_SERVER, args=["--local-timezone", "UTC"], timeout=12)


async def _now(pool: UpstreamPool) -> Any:
    with anyio.fail_after(30):
        while not pool.server_status("time").connected:
            await anyio.sleep(0.05)
    return (await pool.call("time", "get_current_time", {"timezone": "UTC"})).structured_content


async def test_convert_revert_and_reregister_after_bridge_restarts(bridge_factory: Any, tmp_path: Path) -> None:
    port, base = str(free_port()), str(free_port())
    bridge: BridgeProcess = bridge_factory("--port", port, "--base-port", base)
    client = BridgeClient(bridge.url, TOKEN)
    async with await StateStore.open(f"sqlite+aiosqlite:///{tmp_path / 'state.db'}") as store:
        conversions = Conversions(client, store)
        entry = await conversions.convert("time", TIME, actor="api")
        assert entry.url == f"http://127.0.0.1:{base}/mcp" and entry.timeout == 12
        record = await store.conversion("time")
        assert record is not None and record.url == entry.url

        moved: list[tuple[str, str]] = []

        async def on_moved(name: str, url: str) -> None:
            moved.append((name, url))

        async with UpstreamPool({"time": entry}, probe_interval=0.3, backoff_base=0.1) as pool:
            assert await _now(pool)

            def is_down(name: str) -> bool:
                return not pool.server_status(name).connected

            async with anyio.create_task_group() as tg:
                tg.start_soon(conversions.keep_registered, pool.subscribe, is_down, on_moved)
                # The bridge restarts on the same ports: it knows nothing, the gateway re-registers, the call works.
                bridge.stop()
                bridge = bridge_factory("--port", port, "--base-port", base)
                with anyio.fail_after(30):
                    while bridge.api("GET", "/convert/time").status_code != 200:
                        await anyio.sleep(0.1)
                assert await _now(pool), "back without an admin action"
                assert moved == []
                # Restarted on other ports: the server moves, the store follows, the caller is told.
                other = free_port()
                bridge.stop()
                bridge = bridge_factory("--port", port, "--base-port", str(other))
                with anyio.fail_after(30):
                    while not moved:
                        await anyio.sleep(0.1)
                assert moved == [("time", f"http://127.0.0.1:{other}/mcp")]
                record = await store.conversion("time")
                assert record is not None and record.url == moved[0][1]
                tg.cancel_scope.cancel()

        assert await conversions.revert("time", actor="api") is not None
        assert bridge.api("GET", "/convert/time").status_code == 404
        assert await store.conversion("time") is None
        assert await conversions.revert("time", actor="api") is None, "reverting twice: 404 ignored, no record"
