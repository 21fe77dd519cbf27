"""The inspect/exec face end to end: `onetool serve` with real upstreams, real MCP clients of both eras.

/mcp/inspect on an HTTP gateway that enables it, `serve --mode inspect` on stdio and over HTTP, and the CLI's
config errors in that mode.
"""

from __future__ import annotations

import re
import subprocess
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any, Literal

import anyio
import anyio.to_thread
import httpx2
import pytest
import toon_format
from mcp import Client, StdioServerParameters, types

from onetool.serve.inspect._describe import INSTRUCTIONS_MAX_CHARS
from tests.admin_api import admin
from tests.conftest import FIXTURES, PYTHON, TIME_SERVER
from tests.eras import era_clients
from tests.gateways import (
    ONETOOL,
    ServedGateway,
    gateway_config,
    start_http_gateway,
    stop,
    text_of,
    wait_for_record,
    write_config,
)
from tests.serve.inspect.reference_tools import REFERENCE_TOOLS

pytestmark = pytest.mark.anyio

MAX_OUTPUT = 2_000
ERAS = ["auto", "legacy"]
Era = Literal["auto", "legacy"]


@pytest.fixture(scope="module")
def inspecting(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServedGateway]:
    """`onetool serve --http` with /mcp/inspect on and a small result cut."""
    marker = f"insp-{uuid.uuid4().hex}"
    config = gateway_config(marker, max_output=MAX_OUTPUT)
    config["http"] = {"enable_inspect_endpoint": True}
    served = start_http_gateway(tmp_path_factory.mktemp("inspect"), config, marker)
    try:
        yield served
    finally:
        assert stop(served.proc) == 0


def inspect_url(served: ServedGateway) -> str:
    return served.url + "/inspect"


async def call(served: ServedGateway, tool: str, arguments: dict[str, Any], era: Era = "auto") -> types.CallToolResult:
    async with Client(inspect_url(served), mode=era, read_timeout_seconds=60) as client:
        return await client.call_tool(tool, arguments)


async def exec_(served: ServedGateway, server: str, tool: str, arguments: dict[str, Any] | None = None) -> Any:
    return await call(served, "exec", {"server_name": server, "tool_name": tool, "arguments": arguments})


def decoded(result: types.CallToolResult) -> Any:
    """The TOON text decoded, and checked against structuredContent (a non-object value is wrapped there)."""
    assert not result.is_error, text_of(result)
    value = toon_format.decode(text_of(result))
    structured = result.structured_content
    assert structured == (value if isinstance(value, dict) else {"result": value})
    return value


def inspected(result: types.CallToolResult) -> Any:
    """What inspect shows the model: its TOON text decoded. Its structuredContent holds the raw schemas instead
    (spec §4.1), each checked here against the shown tool's name and description."""
    assert not result.is_error, text_of(result)
    value = toon_format.decode(text_of(result))
    raw = result.structured_content
    assert raw is not None
    for shown, tool in zip(value.get("tools", [value]), raw.get("tools", [raw]), strict=True):
        assert (tool["name"], tool["description"]) == (shown["name"], shown["description"])
        assert set(tool) == {"name", "description", "inputSchema", "outputSchema"}
    return value


def tool_calls(served: ServedGateway, server: str, tool: str) -> int:
    """`proxy.tool.call` records in the gateway's log for one upstream tool."""
    pattern = re.compile(rf" proxy\.tool\.call .*\bserver={server} tool={tool}\b")
    return sum(1 for line in served.log.read_text().splitlines() if pattern.search(line))


# ---- where it is served --------------------------------------------------------------------------------------


async def test_off_by_default_404(gateway: ServedGateway) -> None:
    initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}
    headers = {"Accept": "application/json, text/event-stream"}
    async with httpx2.AsyncClient(timeout=20) as http:
        off = await http.post(gateway.url + "/inspect", json=initialize, headers=headers)
        on = await http.post(gateway.url, json=initialize, headers=headers)
    assert off.status_code == 404
    assert on.status_code != 404


async def test_startup_log_says_it_is_on(inspecting: ServedGateway) -> None:
    assert f"inspect/exec endpoint on at {inspect_url(inspecting)}" in inspecting.log.read_text()


@pytest.mark.parametrize("era", ERAS)
async def test_two_tools_described_from_the_live_catalogue(inspecting: ServedGateway, era: Era) -> None:
    async with Client(inspect_url(inspecting), mode=era) as client:
        tools = (await client.list_tools()).tools
    assert [t.name for t in tools] == ["inspect", "exec"]
    text = tools[0].description or ""
    assert "  Server: time\n    - get_current_time: Get current time in a specific timezone\n" in text
    assert "  Server: fx - fault fixture server, mode ok\n" in text
    # The local pack `brave` wins over server-everything's echo; the upstream's other tools stay.
    assert "    - echo: Local echo: wins over the upstream tool of the same name." in text
    assert "    - get-tiny-image: Returns a tiny MCP logo image." in text
    assert "    - web_search: An async local tool." in text
    assert "  Server: proxy\n" in text  # a purely local pack is a server too
    # Failed and disabled servers are left out; the failed one is named in the closing line.
    assert "Server: broken-server" not in text and "Server: off" not in text
    assert text.endswith("\nUnavailable (failed to connect): broken-server")


async def test_instructions_cut_at_300_characters(inspecting: ServedGateway) -> None:
    async with Client(inspect_url(inspecting)) as client:
        text = (await client.list_tools()).tools[0].description or ""
    line = next(line for line in text.splitlines() if line.startswith("  Server: brave - "))
    shown = line.removeprefix("  Server: brave - ")
    assert len(REFERENCE_TOOLS["everything"]["instructions"]) > INSTRUCTIONS_MAX_CHARS
    assert shown.startswith("# Everything Server – Server Instructions Audience: These instructions")
    assert len(shown) == INSTRUCTIONS_MAX_CHARS + len("...") and shown.endswith("...")


# ---- inspect ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("era", ERAS)
async def test_inspect_one_tool(inspecting: ServedGateway, era: Era) -> None:
    result = await call(inspecting, "inspect", {"server_name": "fx", "tool_name": "add"}, era)
    assert inspected(result) == {
        "name": "add",
        "description": "",
        "input": "{a: integer, b: integer}",
        "output": "{result: integer}",
    }
    # Programs get the tool as the upstream declared it.
    assert result.structured_content is not None
    assert result.structured_content["inputSchema"]["properties"] == {
        "a": {"title": "A", "type": "integer"},
        "b": {"title": "B", "type": "integer"},
    }
    assert result.structured_content["outputSchema"]["properties"]["result"]["type"] == "integer"


async def test_inspect_server_lists_every_tool_compressed(inspecting: ServedGateway) -> None:
    value = inspected(await call(inspecting, "inspect", {"server_name": "time"}))
    assert value["server"] == "time"
    assert [t["name"] for t in value["tools"]] == ["get_current_time", "convert_time"]
    assert value["tools"][0]["input"].startswith("{timezone: string /* IANA timezone name (e.g., 'America/New_York'")
    assert value["tools"][0]["output"] == "{timezone: string, datetime: string, day_of_week: string, is_dst: boolean}"


async def test_inspect_local_pack(inspecting: ServedGateway) -> None:
    value = inspected(await call(inspecting, "inspect", {"server_name": "brave", "tool_name": "web_search"}))
    assert value["input"] == "{query: string, count?: integer = 3}"


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"server_name": "tme"}, "unknown server 'tme'. Did you mean 'time'? Available servers: brave, broken_helper,"),
        ({"server_name": "broken-server"}, "server 'broken-server' is unavailable: it failed to connect"),
        ({"server_name": "off"}, "server 'off' is unavailable: disabled"),
        (
            {"server_name": "time", "tool_name": "current_time"},
            "server 'time' has no tool 'current_time'. Did you mean 'get_current_time'? Its tools: get_current_time,",
        ),
        ({"server_name": 7}, "inspect: argument 'server_name': 7 is not of type \"string\""),
        ({"server": "time"}, "inspect got unknown argument 'server'; it accepts: server_name, tool_name"),
    ],
)
async def test_inspect_bad_names(inspecting: ServedGateway, arguments: dict[str, Any], message: str) -> None:
    result = await call(inspecting, "inspect", arguments)
    assert result.is_error
    assert text_of(result).startswith(message), text_of(result)


async def test_inspect_answers_at_a_path_that_ends_in_mcp(inspecting: ServedGateway) -> None:
    alias = inspecting.url.removesuffix("/mcp") + "/inspect/mcp"
    async with Client(alias, read_timeout_seconds=60) as client:
        assert [t.name for t in (await client.list_tools()).tools] == ["inspect", "exec"]


# ---- exec ------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("era", ERAS)
async def test_exec_structured_result_round_trips_through_toon(inspecting: ServedGateway, era: Era) -> None:
    result = await call(
        inspecting,
        "exec",
        {"server_name": "time", "tool_name": "get_current_time", "arguments": {"timezone": "UTC"}},
        era,
    )
    value = decoded(result)
    assert value["timezone"] == "UTC" and isinstance(value["is_dst"], bool)
    assert text_of(result).startswith("timezone: UTC\ndatetime: ")  # TOON, not JSON


@pytest.mark.parametrize("era", ERAS)
async def test_exec_takes_arguments_as_json_text_too(inspecting: ServedGateway, era: Era) -> None:
    # Several clients send an object-typed argument stringified.
    as_text = {"server_name": "time", "tool_name": "get_current_time", "arguments": '{"timezone": "UTC"}'}
    assert decoded(await call(inspecting, "exec", as_text, era))["timezone"] == "UTC"
    for text, message in (
        ('{"timezone": ', "exec: `arguments` is text that is not JSON (Expecting value: line 1 column 14"),
        ('["UTC"]', "exec: `arguments` is JSON text of a list, not an object"),
    ):
        result = await call(inspecting, "exec", {**as_text, "arguments": text}, era)
        assert result.is_error and text_of(result).startswith(message), text_of(result)


@pytest.mark.parametrize("era", ERAS)
@pytest.mark.filterwarnings("ignore::mcp.MCPDeprecationWarning")  # logging/setLevel, deprecated at 2026-07-28
async def test_exec_passes_the_servers_log_messages_to_the_caller_at_its_level(
    inspecting: ServedGateway, era: Era
) -> None:
    logs: list[types.LoggingMessageNotificationParams] = []

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        logs.append(params)

    async with Client(
        inspect_url(inspecting), mode=era, read_timeout_seconds=60, logging_callback=on_log, log_level="info"
    ) as client:
        if era == "legacy":
            await client.set_logging_level("info")
        for level, message in (("debug", "too quiet"), ("error", "it broke")):
            arguments = {"level": level, "message": message}
            said = await client.call_tool("exec", {"server_name": "fx", "tool_name": "say", "arguments": arguments})
            assert not said.is_error, text_of(said)
        with anyio.fail_after(10):
            while not logs:
                await anyio.sleep(0.02)
    assert [(log.level, log.logger, log.data) for log in logs] == [("error", "fx", "fx: it broke")]


async def test_exec_local_pack_list_round_trips_through_toon(inspecting: ServedGateway) -> None:
    result = await exec_(inspecting, "brave", "web_search", {"query": "mcp", "count": 2})
    assert text_of(result) == "[2]{title,rank}:\n  mcp #1,1\n  mcp #2,2"
    assert decoded(result) == [{"title": "mcp #1", "rank": 1}, {"title": "mcp #2", "rank": 2}]


async def test_exec_image_passes_through(inspecting: ServedGateway) -> None:
    result = await exec_(inspecting, "brave", "get-tiny-image")
    assert not result.is_error
    images = [c for c in result.content if isinstance(c, types.ImageContent)]
    assert len(images) == 1 and images[0].mime_type == "image/png" and images[0].data.startswith("iVBOR")
    assert "Here's the image you requested:" in text_of(result)


async def test_exec_resource_passes_through(inspecting: ServedGateway) -> None:
    result = await exec_(inspecting, "brave", "get-resource-reference", {"resourceType": "Text", "resourceId": 2})
    assert not result.is_error
    resources = [c for c in result.content if isinstance(c, types.EmbeddedResource)]
    assert len(resources) == 1
    assert str(resources[0].resource.uri) == "demo://resource/dynamic/text/2"
    assert isinstance(resources[0].resource, types.TextResourceContents)


async def test_exec_result_cut_at_max_output(inspecting: ServedGateway) -> None:
    result = await exec_(inspecting, "fx", "echo", {"message": "x" * 5_000})
    text = text_of(result)
    assert text.startswith('"echo: xxx')  # the TOON of a string that holds ": " is quoted
    assert f"[result cut: showing {MAX_OUTPUT:,} of 5,008 characters; ask for less" in text
    assert result.structured_content == {"result": text, "truncated": True}
    assert len(text) < MAX_OUTPUT + 200


@pytest.mark.parametrize(
    ("server", "tool", "arguments", "message"),
    [
        ("fx", "add", {"a": "one", "b": 2}, 'fx.add: argument \'a\': "one" is not of type "integer"'),
        ("fx", "add", {"a": 1}, "fx.add is missing required argument 'b'"),
        ("fx", "add", {"a": 1, "b": 2, "c": 3}, "fx.add got unknown argument 'c'; it accepts: a, b"),
        ("fx", "count", {"items": ["a", 2]}, "fx.count: argument 'items.1': 2 is not of type \"string\""),
    ],
)
async def test_exec_validates_before_the_upstream_is_called(
    inspecting: ServedGateway, server: str, tool: str, arguments: dict[str, Any], message: str
) -> None:
    before = tool_calls(inspecting, server, tool)
    result = await exec_(inspecting, server, tool, arguments)
    assert result.is_error
    assert text_of(result) == message
    assert tool_calls(inspecting, server, tool) == before


async def test_exec_calls_through_the_pool_with_its_log_span(inspecting: ServedGateway) -> None:
    before = tool_calls(inspecting, "fx", "add")
    assert decoded(await exec_(inspecting, "fx", "add", {"a": 2, "b": 3})) == 5
    with anyio.fail_after(5):
        while tool_calls(inspecting, "fx", "add") == before:
            await anyio.sleep(0.05)
    assert tool_calls(inspecting, "fx", "add") == before + 1


async def test_exec_upstream_error_is_the_upstream_message(inspecting: ServedGateway) -> None:
    result = await exec_(inspecting, "fx", "fail", {"message": "the disk is full"})
    assert result.is_error
    assert text_of(result) == "fx.fail failed: the disk is full"


async def test_exec_timeout_cancels_the_call(inspecting: ServedGateway) -> None:
    # brave's timeout is 3 s.
    result = await exec_(inspecting, "brave", "trigger-long-running-operation", {"duration": 30, "steps": 2})
    assert result.is_error
    assert "timed out after 3.0 s and was cancelled" in text_of(result)


@pytest.mark.parametrize(
    ("server", "tool", "message"),
    [
        ("fxx", "add", "unknown server 'fxx'. Did you mean 'fx'? Available servers:"),
        ("fx", "ad", "server 'fx' has no tool 'ad'. Did you mean 'add'? Its tools: echo, add,"),
        ("brave", "get_tiny_image", "server 'brave' has no tool 'get_tiny_image'. Did you mean 'get-tiny-image'?"),
        ("broken-server", "x", "server 'broken-server' is unavailable: it failed to connect"),
    ],
)
async def test_exec_unknown_names_answer_with_the_closest(
    inspecting: ServedGateway, server: str, tool: str, message: str
) -> None:
    result = await exec_(inspecting, server, tool)
    assert result.is_error
    assert text_of(result).startswith(message), text_of(result)


# ---- list_changed ----------------------------------------------------------------------------------------------


async def test_catalogue_change_reaches_inspect_clients_of_both_eras(tmp_path: Path) -> None:
    config = {
        "servers": {"fx": {"command": PYTHON, "args": [str(FIXTURES / "fault_server.py"), "ok"]}},
        "http": {"enable_inspect_endpoint": True},
    }
    served = start_http_gateway(tmp_path, config, f"lc-{uuid.uuid4().hex}")
    try:
        async with era_clients(inspect_url(served)) as clients:
            before = (await clients.modern.list_tools()).tools[0].description or ""
            assert "    - add\n" in before and "shiny" not in before
            clients.drain()
            added = await clients.legacy.call_tool(
                "exec", {"server_name": "fx", "tool_name": "add_tool", "arguments": {"name": "shiny"}}
            )
            assert text_of(added) == "added shiny"
            await clients.both_heard()
            for client in (clients.legacy, clients.modern):
                after = (await client.list_tools()).tools[0].description or ""
                assert "    - shiny\n" in after
            ran = await clients.modern.call_tool("exec", {"server_name": "fx", "tool_name": "shiny"})
            assert text_of(ran) == "I am shiny"
    finally:
        assert stop(served.proc) == 0


async def test_a_reload_changes_the_cut_of_the_next_exec(tmp_path: Path) -> None:
    """The face reads the config served at each call (one holder, which a reload swaps): a new `max_output` cuts
    the next result, with no restart."""
    config: dict[str, Any] = {
        "servers": {"fx": {"command": PYTHON, "args": [str(FIXTURES / "fault_server.py"), "ok"]}},
        "http": {"enable_inspect_endpoint": True},
        "sandbox": {"max_output": 3_000},
    }
    served = start_http_gateway(tmp_path, config, f"rl-{uuid.uuid4().hex}")
    try:
        before = text_of(await exec_(served, "fx", "echo", {"message": "x" * 5_000}))
        assert "[result cut: showing 3,000 of 5,008 characters" in before
        write_config(tmp_path, {**config, "sandbox": {"max_output": 1_000}})
        status, reloaded = await anyio.to_thread.run_sync(admin, served.url, "POST", "/admin/reload", {})
        assert status == 200, reloaded
        after = text_of(await exec_(served, "fx", "echo", {"message": "x" * 5_000}))
        assert "[result cut: showing 1,000 of 5,008 characters" in after
    finally:
        assert stop(served.proc) == 0


# ---- quarantine ------------------------------------------------------------------------------------------------


async def described(client: Client) -> str:
    return (await client.list_tools()).tools[0].description or ""


async def admin_action(served: ServedGateway, server: str, action: str) -> dict[str, Any]:
    """POST /admin/servers/{server}/{action}, as an operator would; the server's view it answers."""
    status, view = await anyio.to_thread.run_sync(admin, served.url, "POST", f"/admin/servers/{server}/{action}", {})
    assert status == 200, view
    return view


async def test_a_quarantined_server_is_hidden_and_refused_until_approved(tmp_path: Path) -> None:
    """Quarantine through the admin API: the server leaves inspect's description, inspect and exec answer that an
    operator holds it for review (no upstream call is made), and every client hears it; approval brings it back."""
    config = {**SMALL_CONFIG, "http": {"enable_inspect_endpoint": True}}
    served = start_http_gateway(tmp_path, config, f"quar-{uuid.uuid4().hex}")
    current_time = {"server_name": "time", "tool_name": "get_current_time", "arguments": {"timezone": "UTC"}}
    try:
        async with era_clients(inspect_url(served)) as clients:
            assert "  Server: time\n" in await described(clients.modern)
            calls = tool_calls(served, "time", "get_current_time")

            clients.drain()
            assert (await admin_action(served, "time", "quarantine"))["quarantined"]
            await clients.both_heard()
            for client in (clients.legacy, clients.modern):
                description = await described(client)
                assert "Server: time" not in description and "get_current_time" not in description
                assert "  Server: fx - fault fixture server, mode ok\n" in description
            held = "server 'time' is unavailable: held for review by an operator (quarantined)"
            for tool, arguments in (("inspect", {"server_name": "time"}), ("exec", current_time)):
                refused = await clients.legacy.call_tool(tool, arguments)
                assert refused.is_error and text_of(refused).startswith(held), text_of(refused)
            assert tool_calls(served, "time", "get_current_time") == calls

            clients.drain()
            assert not (await admin_action(served, "time", "approve"))["quarantined"]
            await clients.both_heard()
            for client in (clients.legacy, clients.modern):
                assert "  Server: time\n    - get_current_time: " in await described(client)
            found = await clients.modern.call_tool("inspect", {"server_name": "time", "tool_name": "get_current_time"})
            assert inspected(found)["name"] == "get_current_time"
            assert decoded(await clients.modern.call_tool("exec", current_time))["timezone"] == "UTC"
    finally:
        assert stop(served.proc) == 0


# ---- serve --mode inspect --------------------------------------------------------------------------------------


SMALL_CONFIG = {
    "servers": {
        "time": {"command": TIME_SERVER, "args": ["--local-timezone", "UTC"]},
        "fx": {"command": PYTHON, "args": [str(FIXTURES / "fault_server.py"), "ok"]},
    }
}


@pytest.fixture
async def stdio_inspect(tmp_path: Path) -> AsyncIterator[StdioServerParameters]:
    args = ["serve", "--mode", "inspect", "--config", str(write_config(tmp_path, SMALL_CONFIG))]
    yield StdioServerParameters(command=ONETOOL, args=[*args, "--log-file", str(tmp_path / "gateway.log")])
    assert "face: inspect/exec (serve --mode inspect)" in (tmp_path / "gateway.log").read_text()


@pytest.mark.parametrize("era", ERAS)
async def test_stdio_mode_inspect(stdio_inspect: StdioServerParameters, era: Era) -> None:
    async with Client(stdio_inspect, mode=era, read_timeout_seconds=60) as client:
        # stdio answers at once; the servers connect behind it, and this test reads their catalogue.
        await anyio.to_thread.run_sync(wait_for_record, Path(stdio_inspect.args[-1]), "proxy.init")
        tools = (await client.list_tools()).tools
        assert [t.name for t in tools] == ["inspect", "exec"]
        assert "  Server: time\n" in (tools[0].description or "")
        found = await client.call_tool("inspect", {"server_name": "fx", "tool_name": "add"})
        added = await client.call_tool("exec", {"server_name": "fx", "tool_name": "add", "arguments": {"a": 1, "b": 2}})
        wrong = await client.call_tool(
            "exec", {"server_name": "fx", "tool_name": "add", "arguments": {"a": "1", "b": 2}}
        )
    assert inspected(found)["input"] == "{a: integer, b: integer}"
    assert decoded(added) == 3
    assert wrong.is_error and text_of(wrong) == 'fx.add: argument \'a\': "1" is not of type "integer"'


async def test_http_mode_inspect_serves_it_at_mcp(tmp_path: Path) -> None:
    served = start_http_gateway(tmp_path, SMALL_CONFIG, "unused", "--mode", "inspect")
    try:
        for era in ERAS:
            async with Client(served.url, mode=era) as client:
                assert [t.name for t in (await client.list_tools()).tools] == ["inspect", "exec"], era
                result = await client.call_tool(
                    "exec", {"server_name": "time", "tool_name": "get_current_time", "arguments": {"timezone": "UTC"}}
                )
            assert decoded(result)["timezone"] == "UTC", era
        async with httpx2.AsyncClient(timeout=20) as http:
            assert (await http.post(served.url + "/inspect", json={})).status_code == 404
    finally:
        assert stop(served.proc) == 0


# ---- config errors ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("missing.yaml", None, "cannot read config file: No such file or directory"),
        ("bad.yaml", "servers:\n  time: [unclosed\n", "invalid YAML (line 3, column 1)"),
        # Python 3.13 points at the trailing comma (column 37), 3.11 past it (38).
        ("bad.json", '{"servers": {"time": {"command": "x",}', "invalid JSON (line 1, column 3"),
        ("wrong.json", '{"servers": ["time"]}', "invalid configuration: servers: Input should be a valid dictionary"),
        ("unknown.yaml", "inspect:\n  compression: true\n", "inspect.compression: unknown key; did you mean 'schema_c"),
    ],
)
def test_config_errors_exit_2_with_one_message(tmp_path: Path, name: str, content: str | None, message: str) -> None:
    path = tmp_path / name
    if content is not None:
        path.write_text(content)
    done = subprocess.run(
        [ONETOOL, "serve", "--mode", "inspect", "--config", str(path)],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert done.stdout == ""
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith(f"onetool: {path}: ") and message in lines[0], lines[0]


@pytest.mark.parametrize(
    ("options", "shown"),
    [
        ({"schema_compression": False}, lambda tool: tool["inputSchema"]["properties"]["timezone"]["type"] == "string"),
        ({"max_description_len": 10}, lambda tool: tool["input"].startswith("{timezone: string /* IANA timez... */")),
        ({"max_description_len": 0}, lambda tool: tool["input"] == "{timezone: string}"),
    ],
    ids=["uncompressed", "short-descriptions", "no-descriptions"],
)
async def test_the_inspect_options_change_what_inspect_shows(
    tmp_path: Path, options: dict[str, Any], shown: Any
) -> None:
    marker = f"insp-{uuid.uuid4().hex}"
    config = {
        "servers": {"time": {"command": TIME_SERVER, "args": ["--local-timezone", "UTC"]}},
        "http": {"enable_inspect_endpoint": True},
        "inspect": options,
    }
    served = start_http_gateway(tmp_path, config, marker)
    try:
        arguments = {"server_name": "time", "tool_name": "get_current_time"}
        tool = inspected(await call(served, "inspect", arguments))
        assert shown(tool), tool
    finally:
        assert stop(served.proc) == 0


async def test_four_exec_calls_at_once_overlap(inspecting: ServedGateway) -> None:
    spans: list[tuple[float, float]] = []

    async def one(tag: str) -> None:
        start = time.perf_counter()
        result = await exec_(inspecting, "fx", "sleep", {"seconds": 1.0, "tag": tag})
        spans.append((start, time.perf_counter()))
        assert decoded(result) == "slept 1.0"

    async with anyio.create_task_group() as tg:
        for tag in "abcd":
            tg.start_soon(one, tag)
    # Every call started before any ended: they ran side by side, not one after another.
    assert max(start for start, _ in spans) < min(end for _, end in spans)


async def test_a_server_crashed_through_exec_is_then_unavailable_not_unknown(tmp_path: Path) -> None:
    # The fixture serves once; restarted after its crash, it refuses to start, so the server stays down.
    mark = tmp_path / "served-once"
    fault = FIXTURES / "fault_server.py"
    script = f"if [ -e {mark} ]; then exec {PYTHON} {fault} exit; fi; touch {mark}; exec {PYTHON} {fault} ok"
    config = {
        "servers": {"fx": {"command": "sh", "args": ["-c", script]}},
        "http": {"enable_inspect_endpoint": True},
    }
    served = start_http_gateway(tmp_path, config, f"insp-{uuid.uuid4().hex}")
    try:
        crashed = await exec_(served, "fx", "crash")
        assert crashed.is_error
        after = await exec_(served, "fx", "add", {"a": 1, "b": 2})
        assert after.is_error and "server 'fx' is unavailable" in text_of(after), text_of(after)
        assert "has no tool" not in text_of(after)
    finally:
        assert stop(served.proc) == 0
