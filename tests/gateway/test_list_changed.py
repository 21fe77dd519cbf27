"""An upstream's tools change -> the `run` description changes -> every front client hears tools/list_changed."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from tests.conftest import FIXTURES, PYTHON
from tests.gateway.conftest import start_http_gateway, stop, text_of

pytestmark = pytest.mark.anyio


async def test_upstream_tool_change_reaches_clients_of_both_eras(tmp_path: Path) -> None:
    config = {"servers": {"fx": {"command": PYTHON, "args": [str(FIXTURES / "fault_server.py"), "ok"]}}}
    served = start_http_gateway(tmp_path, config, f"lc-{uuid.uuid4().hex}")
    try:
        legacy_heard = anyio.Event()

        async def on_message(message: Any) -> None:
            if getattr(message, "method", "") == "notifications/tools/list_changed":
                legacy_heard.set()

        async with (
            Client(served.url, mode="legacy", message_handler=on_message) as legacy,
            Client(served.url) as modern,
        ):
            before = (await modern.list_tools()).tools[0].description or ""
            assert "fx.echo(message: str)" in before and "fx.shiny" not in before
            async with modern.listen(tools_list_changed=True) as events:
                result = await legacy.call_tool("run", {"code": "fx.add_tool(name='shiny')"})
                assert text_of(result) == "added shiny", text_of(result)
                with anyio.fail_after(10):
                    await legacy_heard.wait()
                    async for _ in events:
                        break
            for client in (legacy, modern):
                after = (await client.list_tools()).tools[0].description or ""
                assert "fx.shiny()" in after
            ran = await modern.call_tool("run", {"code": "fx.shiny()"})
            assert text_of(ran) == "I am shiny"
    finally:
        assert stop(served.proc) == 0
