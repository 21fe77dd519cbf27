"""servers.NAME.tools: {allow, deny}: the tools OneTool offers of a server, by name or glob pattern, on every face
(run and its description, /mcp/direct, proxy.*, the typed module); a client config's tool filters are imported
as such."""

from __future__ import annotations

import json
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from mcp import Client

from onetool.config import ToolFilter, load_config
from tests.conftest import FIXTURES, PYTHON, TIME_SERVER
from tests.gateways import ServedGateway, origin, start_http_gateway, stop, text_of

CONFIG = {
    "servers": {
        "time": {"command": TIME_SERVER, "tools": {"deny": ["convert_*"]}},
        "fx": {
            "command": PYTHON,
            "args": [str(FIXTURES / "fault_server.py"), "ok"],
            "tools": {"allow": ["echo", "a*"]},
        },
    },
    "http": {"enable_direct_endpoint": True},
}


def test_allow_and_deny_take_names_and_patterns() -> None:
    only = ToolFilter(allow=["echo", "get_*"], deny=["get_secret"])
    assert [only.permits(n) for n in ("echo", "get_time", "get_secret", "crash")] == [True, True, False, False]
    assert ToolFilter().permits("anything") and not ToolFilter(deny=["*"]).permits("anything")


def test_a_client_configs_tool_filters_are_imported(tmp_path: Path) -> None:
    client = {
        "mcpServers": {
            "gh": {"command": "x", "disabledTools": ["delete_repo"]},
            "gem": {"command": "y", "includeTools": ["read_*"], "excludeTools": ["read_secret"]},
        }
    }
    (tmp_path / "mcp.json").write_text(json.dumps(client))
    servers = load_config(tmp_path / "mcp.json").servers
    assert servers["gh"].tools == ToolFilter(deny=["delete_repo"])
    assert servers["gem"].tools == ToolFilter(allow=["read_*"], deny=["read_secret"])


@pytest.fixture(scope="module")
def filtered(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServedGateway]:
    folder = tmp_path_factory.mktemp("filtered")
    served = start_http_gateway(folder, CONFIG, f"filter-{uuid.uuid4().hex}")
    try:
        yield served
    finally:
        assert stop(served.proc) == 0


async def test_every_face_offers_only_what_the_filter_lets_through(filtered: ServedGateway) -> None:
    async with Client(filtered.url, read_timeout_seconds=60) as client:
        description = (await client.list_tools()).tools[0].description or ""
        assert "\ntime:\n  get_current_time(" in description and "convert_time" not in description
        assert (
            "\nfx:\n" in description
            and "\n  echo(" in description
            and "\n  add(" in description
            and "crash" not in description
        )
        denied = await client.call_tool(
            "run", {"code": "time.convert_time(source_timezone='UTC', time='12:00', target_timezone='UTC')"}
        )
        assert denied.is_error and "convert_time" in text_of(denied)
        # Hostile payload: a denied tool reached around its pack, through proxy.call by its upstream name.
        around = await client.call_tool("run", {"code": "proxy.call('fx', 'crash', {})"})
        assert around.is_error and "no tool 'crash'" in text_of(around), text_of(around)
        listed = await client.call_tool("run", {"code": "[t['name'] for t in proxy.list_tools('fx')]"})
        assert json.loads(text_of(listed)) == ["echo", "add", "add_tool"]
    async with Client(origin(filtered.url) + "/mcp/direct", read_timeout_seconds=60) as direct:
        names = [t.name for t in (await direct.list_tools()).tools if ":" in t.name]
    assert sorted(names) == ["fx:add", "fx:add_tool", "fx:echo", "time:get_current_time"]
    with urllib.request.urlopen(origin(filtered.url) + "/runtime/tools.py", timeout=30) as response:
        module = response.read().decode()
    assert "def get_current_time(" in module and "def convert_time(" not in module and "def crash(" not in module
