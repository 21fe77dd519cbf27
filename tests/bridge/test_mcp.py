"""MCP clients of both protocol eras through bridged URLs: server-everything (2025 era) and mcp-server-time (2026)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import mcp.types as types
import pytest
from mcp import MCPError

from tests.bridge.conftest import BridgeProcess, everything, fault, mcp_client, time_server

pytestmark = pytest.mark.anyio
MODES = ["auto", "legacy"]


@pytest.fixture(scope="module")
def urls(bridge: BridgeProcess) -> Iterator[dict[str, str]]:
    converted = {
        "everything": bridge.convert(everything("mcp-everything"))["url"],
        "time": bridge.convert(time_server("mcp-time"))["url"],
    }
    yield converted
    for name in ("mcp-everything", "mcp-time"):
        bridge.api("DELETE", f"/convert/{name}")


@pytest.mark.parametrize("mode", MODES)
async def test_everything_tools_resources_prompts(urls: dict[str, str], mode: str) -> None:
    async with mcp_client(urls["everything"], mode) as client:
        assert client.protocol_version == ("2025-11-25" if mode == "legacy" else "2026-07-28")
        assert client.server_info.name == "mcp-servers/everything", "the bridged server's own identity"
        tools = {t.name for t in (await client.list_tools()).tools}
        assert {"echo", "get-sum", "trigger-long-running-operation"} <= tools
        echoed = await client.call_tool("echo", {"message": "through the bridge"})
        assert echoed.content[0].text == "Echo: through the bridge"  # type: ignore[union-attr]
        structured = await client.call_tool("get-structured-content", {"location": "New York"})
        assert structured.structured_content is not None

        resources = (await client.list_resources()).resources
        assert resources
        contents = (await client.read_resource(str(resources[0].uri))).contents
        assert contents and str(contents[0].uri) == str(resources[0].uri)
        prompt = await client.get_prompt("simple-prompt")
        assert prompt.messages

        unknown = await client.call_tool("no-such-tool", {})
        assert unknown.is_error, "the upstream's own answer, passed through"


@pytest.mark.parametrize("mode", MODES)
async def test_progress_notifications_reach_the_client(urls: dict[str, str], mode: str) -> None:
    events: list[tuple[float, float | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        events.append((progress, total))

    async with mcp_client(urls["everything"], mode) as client:
        result = await client.call_tool(
            "trigger-long-running-operation", {"duration": 1, "steps": 4}, progress_callback=on_progress
        )
    assert not result.is_error
    assert events == [(1, 4), (2, 4), (3, 4), (4, 4)]


@pytest.mark.parametrize("mode", MODES)
async def test_time_server_of_the_2026_era(urls: dict[str, str], mode: str) -> None:
    async with mcp_client(urls["time"], mode) as client:
        assert {t.name for t in (await client.list_tools()).tools} == {"get_current_time", "convert_time"}
        result = await client.call_tool("get_current_time", {"timezone": "UTC"})
        assert not result.is_error and result.structured_content is not None
        assert result.structured_content["timezone"] == "UTC"


async def test_timeout_and_cancellation_reach_the_upstream(bridge: BridgeProcess, tmp_path: Path) -> None:
    cancel_log = tmp_path / "cancelled.log"
    url = bridge.convert(fault("mcp-cancel", timeout=1, env={"CANCEL_LOG": str(cancel_log)}))["url"]
    try:
        async with mcp_client(url, "legacy") as client:
            with pytest.raises(MCPError) as caught:
                await client.call_tool("sleep", {"seconds": 30, "tag": "timeout"})
            assert caught.value.code == types.REQUEST_TIMEOUT
            assert "timed out after 1 s" in caught.value.message
            with anyio.move_on_after(0.5) as scope:
                await client.call_tool("sleep", {"seconds": 30, "tag": "client"})
            assert scope.cancelled_caught
            with anyio.fail_after(10):
                while cancel_log.read_text().splitlines() != ["cancelled timeout", "cancelled client"]:
                    await anyio.sleep(0.05)
            assert (await client.call_tool("echo", {"message": "still here"})).content, "the session survives"
    finally:
        bridge.api("DELETE", "/convert/mcp-cancel")


async def test_upstream_json_rpc_errors_keep_their_code(bridge: BridgeProcess) -> None:
    url = bridge.convert(fault("mcp-errors"))["url"]
    try:
        async with mcp_client(url) as client:
            with pytest.raises(MCPError) as caught:
                await client.call_tool("fail", {"message": "refused on purpose"})
        assert caught.value.code == types.INVALID_PARAMS and caught.value.message == "refused on purpose"
    finally:
        bridge.api("DELETE", "/convert/mcp-errors")


@pytest.mark.parametrize("mode", MODES)
async def test_tools_list_changed_reaches_both_eras(bridge: BridgeProcess, mode: str) -> None:
    name = f"mcp-changes-{mode}"
    url = bridge.convert(fault(name))["url"]
    changed = anyio.Event()

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            changed.set()

    try:
        async with mcp_client(url, mode, message_handler=on_message) as client:
            await client.list_tools()
            if mode == "legacy":
                await client.call_tool("add_tool", {"name": "brand_new"})
                with anyio.fail_after(10):
                    await changed.wait()
            else:
                async with client.listen(tools_list_changed=True) as events:
                    await client.call_tool("add_tool", {"name": "brand_new"})
                    with anyio.fail_after(10):
                        await events.__anext__()
            assert "brand_new" in {t.name for t in (await client.list_tools()).tools}
    finally:
        bridge.api("DELETE", f"/convert/{name}")


async def test_log_messages_reach_handshake_era_clients(urls: dict[str, str]) -> None:
    logs: list[Any] = []
    got = anyio.Event()

    async def on_message(message: Any) -> None:
        if isinstance(message, types.LoggingMessageNotification):
            logs.append(message.params)
            got.set()

    async with mcp_client(urls["everything"], "legacy", message_handler=on_message) as client:
        await client.list_tools()  # the client has its notification stream open by now
        await client.call_tool("toggle-simulated-logging", {})
        try:
            with anyio.fail_after(12):  # the server logs at once, then every 5 s
                await got.wait()
        finally:
            await client.call_tool("toggle-simulated-logging", {})
    assert "-level message" in str(logs[0].data) or "level-message" in str(logs[0].data)


@pytest.mark.parametrize("mode", MODES)
async def test_a_server_that_does_not_identify_itself_is_served_under_its_name(
    bridge: BridgeProcess, mode: str
) -> None:
    name = f"mcp-anonymous-{mode}"
    url = bridge.convert(fault(name, "anonymous"))["url"]
    try:
        async with mcp_client(url, mode) as client:
            assert client.server_info is not None and client.server_info.name == name
            assert (await client.call_tool("echo", {"message": "hi"})).content
    finally:
        bridge.api("DELETE", f"/convert/{name}")
