"""An upstream's tools change -> the `run` description changes -> every front client hears tools/list_changed."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from tests.conftest import FIXTURES, PYTHON
from tests.eras import era_clients
from tests.gateways import start_http_gateway, stop, text_of

pytestmark = pytest.mark.anyio


async def test_upstream_tool_change_reaches_clients_of_both_eras(tmp_path: Path) -> None:
    config = {"servers": {"fx": {"command": PYTHON, "args": [str(FIXTURES / "fault_server.py"), "ok"]}}}
    served = start_http_gateway(tmp_path, config, f"lc-{uuid.uuid4().hex}")
    try:
        async with era_clients(served.url) as clients:
            before = (await clients.modern.list_tools()).tools[0].description or ""
            assert "\nfx:\n" in before and "\n  echo(message: str)" in before and "shiny" not in before
            clients.drain()
            result = await clients.legacy.call_tool("run", {"code": "fx.add_tool(name='shiny')"})
            assert text_of(result) == "added shiny", text_of(result)
            await clients.both_heard()
            for client in (clients.legacy, clients.modern):
                after = (await client.list_tools()).tools[0].description or ""
                assert "\n  shiny()" in after
            ran = await clients.modern.call_tool("run", {"code": "fx.shiny()"})
            assert text_of(ran) == "I am shiny"
    finally:
        assert stop(served.proc) == 0
