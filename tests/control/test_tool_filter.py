"""servers.NAME.tools: {allow, deny}: the tools OneTool offers of a server, by name or glob pattern, on every face
(run and its description, /mcp/direct, proxy.*, the typed module); a client config's tool filters are imported
as such."""

from __future__ import annotations

import json
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from mcp import Client

from onetool.config import ToolFilter, load_config
from onetool.state import StateStore
from tests.admin_api import admin, cli
from tests.conftest import FIXTURES, PYTHON, TIME_SERVER
from tests.gateways import ServedGateway, origin, start_http_gateway, stop, text_of, write_config

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
TOKEN = "filter-admin-token"


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
    served = start_http_gateway(folder, CONFIG, f"filter-{uuid.uuid4().hex}", env={"ONETOOL_ADMIN_TOKEN": TOKEN})
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


# ---- changed at run time: admin API, `onetool servers tools`, the store ----------------------------------------


async def run_names(url: str) -> tuple[str, list[str]]:
    """The run description and /mcp/direct's upstream tool names, as a client lists them now."""
    async with Client(url, read_timeout_seconds=60) as client:
        description = (await client.list_tools()).tools[0].description or ""
    async with Client(origin(url) + "/mcp/direct", read_timeout_seconds=60) as direct:
        names = sorted(t.name for t in (await direct.list_tools()).tools if ":" in t.name)
    return description, names


async def test_a_filter_set_at_run_time_replaces_the_entrys_reaches_every_face_and_lasts(tmp_path: Path) -> None:
    marker = f"filter-{uuid.uuid4().hex}"
    served = start_http_gateway(tmp_path, CONFIG, marker)
    config = str(tmp_path / "onetool.yaml")
    try:
        async with (
            Client(served.url, read_timeout_seconds=60) as listener,
            listener.listen(tools_list_changed=True) as events,
        ):
            done = cli("servers", "tools", "fx", "--allow", "*", "--deny", "echo", "--config", config)
            assert done.returncode == 0, done.stderr
            with anyio.fail_after(10):
                await events.__anext__()  # faces heard it
            assert "tools filter (run time): allow *; deny echo" in done.stdout
            assert "  HIDDEN   echo" in done.stdout and "           crash" in done.stdout
        description, names = await run_names(served.url)
        assert "\n  crash(" in description and "\n  echo(" not in description
        assert "fx:crash" in names and "fx:echo" not in names
        hidden = await served.run("proxy.call('fx', 'echo', {'message': 'x'})")
        assert hidden.is_error and "no tool 'echo'" in text_of(hidden), text_of(hidden)
        status, view = admin(served.url, "GET", "/admin/servers/fx")
        assert status == 200 and view["tools_filter"] == {"allow": ["*"], "deny": ["echo"], "from": "run time"}
        assert stop(served.proc) == 0

        served = start_http_gateway(tmp_path, CONFIG, marker)  # stored: a restart keeps it
        assert "fx:echo" not in (await run_names(served.url))[1]
        done = cli("servers", "tools", "fx", "--reset", "--config", config, "--json")
        assert done.returncode == 0, done.stderr
        shown = json.loads(done.stdout)
        assert shown["tools_filter"] == {"allow": ["echo", "a*"], "deny": [], "from": "entry"}
        assert {t["name"]: t["offered"] for t in shown["tools"]}["crash"] is False
        assert (await run_names(served.url))[1] == ["fx:add", "fx:add_tool", "fx:echo", "time:get_current_time"]
        async with await StateStore.open(load_config(config).store_url) as store:
            actions = [(e.actor, e.action, e.details) for e in await store.audit_log(server="fx")]
        assert ("cli", "set_tools", {"tools": None}) in actions
        assert ("cli", "set_tools", {"tools": {"allow": ["*"], "deny": ["echo"]}}) in actions
    finally:
        assert stop(served.proc) == 0


async def test_a_bad_filter_or_an_unknown_server_changes_nothing_and_says_why(filtered: ServedGateway) -> None:
    before = await run_names(filtered.url)
    status, body = admin(filtered.url, "PUT", "/admin/servers/fx/tools", {"allow": "echo"}, TOKEN)
    assert status == 400 and "bad tools filter for 'fx': allow: Input should be a valid list" in body["error"]
    status, body = admin(filtered.url, "PUT", "/admin/servers/fx/tools", {"deny": ["x"], "hide": ["y"]}, TOKEN)
    assert status == 400 and "hide: Extra inputs are not permitted" in body["error"]
    status, body = admin(filtered.url, "PUT", "/admin/servers/nosuch/tools", {"deny": []}, TOKEN)
    assert status == 404 and "unknown server 'nosuch'" in body["error"]
    done = cli("servers", "tools", "fx", "--reset", "--deny", "x", "--url", origin(filtered.url))
    assert done.returncode == 2 and "--reset drops the filter" in done.stderr
    assert await run_names(filtered.url) == before


async def test_a_filter_set_in_the_store_without_a_gateway_or_by_another_replica_applies(tmp_path: Path) -> None:
    config = write_config(tmp_path, CONFIG)
    done = cli("servers", "tools", "time", "--allow", "convert_time", "--config", str(config))
    assert done.returncode == 0 and "set the tools filter of server 'time'; applies when the gateway starts" in (
        done.stdout
    ), done.stderr
    served = start_http_gateway(tmp_path, CONFIG, f"filter-{uuid.uuid4().hex}")
    try:
        assert (
            "time:convert_time" in (names := (await run_names(served.url))[1]) and "time:get_current_time" not in names
        )
        # Another replica (or process) on the same store: this gateway follows the store's change counter.
        async with await StateStore.open(load_config(config).store_url) as store:
            version = (await store.overrides())["time"].version
            await store.set_tools("time", None, "api", expected=version)
        deadline = anyio.current_time() + 10
        while "time:get_current_time" not in (await run_names(served.url))[1]:
            assert anyio.current_time() < deadline, "the store's change never reached the gateway"
            await anyio.sleep(0.2)
    finally:
        assert stop(served.proc) == 0
