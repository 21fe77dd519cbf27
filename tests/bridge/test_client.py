"""The gateway's BridgeClient against a real bridge process, and the conversion records of the state store."""

from __future__ import annotations

from pathlib import Path

import pytest

from onetool.config import BridgeConfig, ServerConfig
from onetool.control.bridge_client import BridgeClient
from onetool.errors import BridgeError, BridgeUnavailable
from onetool.state import StateStore
from tests.bridge.conftest import TOKEN, BridgeProcess, mcp_client
from tests.conftest import TIME_SERVER, free_port

pytestmark = pytest.mark.anyio
TIME = ServerConfig(command=TIME_SERVER, args=["--local-timezone", "UTC"], env={"TZ_SECRET": "not-logged"})


async def test_convert_is_idempotent_and_revert_ignores_404(bridge: BridgeProcess) -> None:
    client = BridgeClient(bridge.url, TOKEN)
    url = await client.convert("client-time", TIME)
    assert await client.convert("client-time", TIME) == url, "409: already running counts as success"
    async with mcp_client(url) as mcp:
        assert (await mcp.call_tool("get_current_time", {"timezone": "UTC"})).structured_content
    listed = {c.server_name: c for c in await client.status()}
    assert listed["client-time"].url == url and listed["client-time"].status == "running"
    got = await client.get("client-time")
    assert got is not None and got.port == listed["client-time"].port
    assert await client.revert("client-time") is True
    assert await client.revert("client-time") is False, "404: already stopped"
    assert await client.get("client-time") is None


async def test_a_process_that_cannot_start_is_bridge_unavailable(bridge: BridgeProcess) -> None:
    client = BridgeClient(bridge.url, TOKEN)
    with pytest.raises(BridgeUnavailable) as caught:
        await client.convert("client-broken", ServerConfig(command="no-such-command-for-the-client"))
    assert caught.value.status == 503
    assert str(caught.value).startswith("bridge unavailable: ")
    assert "command not found: no-such-command-for-the-client" in str(caught.value)


async def test_unreachable_and_refused_token_are_bridge_unavailable(bridge: BridgeProcess) -> None:
    nowhere = BridgeClient(f"http://127.0.0.1:{free_port()}", TOKEN)
    with pytest.raises(BridgeUnavailable, match=r"^bridge unavailable: cannot reach http://127\.0\.0\.1:\d+ "):
        await nowhere.convert("x", TIME)
    with pytest.raises(BridgeUnavailable, match="refused the token"):
        await BridgeClient(bridge.url, "wrong").revert("x")
    with pytest.raises(BridgeUnavailable, match="no JSON object"):
        await BridgeClient(f"{bridge.url}/not-the-api", TOKEN).status()


async def test_refused_specs_say_why(bridge: BridgeProcess) -> None:
    client = BridgeClient(bridge.url, TOKEN)
    with pytest.raises(BridgeError, match="only stdio servers") as http_server:
        await client.convert("web", ServerConfig(url="http://127.0.0.1:1/mcp"))
    assert http_server.value.status == 400
    with pytest.raises(BridgeError) as bad_name:
        await client.convert("not/a/name", TIME)
    assert bad_name.value.status == 400 and bad_name.value.field == "serverName"


def test_from_config_prefers_the_environment() -> None:
    assert BridgeClient.from_config(BridgeConfig(), environ={}) is None
    client = BridgeClient.from_config(
        BridgeConfig(url="https://file:1", token="file-token"), environ={"ONETOOL_BRIDGE_URL": "https://env:2/"}
    )
    assert client is not None and (client.url, client.token, client.allow_http) == (
        "https://env:2",
        "file-token",
        False,
    )
    trusted = BridgeClient.from_config(BridgeConfig(url="http://file:1", allow_http=True), environ={})
    assert trusted is not None and trusted.allow_http


def test_urls_the_bridge_serves_follow_the_plain_http_rule() -> None:
    """A bridge reached over https may still answer http URLs (a TLS proxy in front of it): the gateway would send
    the token in clear to them, so only ``bridge.allow_http`` lets it."""
    client = BridgeClient("https://bridge-host:8080", TOKEN)
    assert client.served("time", "https://bridge-host:9001/mcp") == "https://bridge-host:9001/mcp"
    assert client.served("time", "http://127.0.0.1:9001/mcp") == "http://127.0.0.1:9001/mcp"
    with pytest.raises(BridgeError) as refused:
        client.served("time", "http://bridge-host:9001/mcp")
    assert refused.value.status == 503
    assert "serves 'time' over plain http at bridge-host" in str(refused.value)
    assert "--tls-cert/--tls-key, or set bridge.allow_http: true" in str(refused.value)
    trusted = BridgeClient("http://bridge-host:8080", TOKEN, allow_http=True)
    assert trusted.served("time", "http://bridge-host:9001/mcp") == "http://bridge-host:9001/mcp"


async def test_conversion_records_round_trip_across_reopen(tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'state.db'}"
    async with await StateStore.open(url) as store:
        record = await store.record_conversion(
            "time",
            command="mcp-server-time",
            args=["--local-timezone", "UTC"],
            env={"K": "secret"},
            url="http://b:1/mcp",
            actor="api",
        )
        moved = await store.set_conversion_url("time", "http://b:2/mcp", actor="gateway")
        assert moved is not None and moved.url == "http://b:2/mcp" and moved.converted_at == record.converted_at
        assert await store.set_conversion_url("unknown", "http://b:3/mcp", actor="gateway") is None
    async with await StateStore.open(url) as store:
        again = await store.conversion("time")
        assert again is not None
        assert (again.command, again.args, again.env, again.url) == (
            "mcp-server-time",
            ["--local-timezone", "UTC"],
            {"K": "secret"},
            "http://b:2/mcp",
        )
        assert list(await store.conversions()) == ["time"]
        audit = await store.audit_log(server="time")
        assert [e.action for e in audit] == ["conversion_url", "convert_server"]
        assert "secret" not in str([e.details for e in audit]), "env values never in the audit log"
        removed = await store.remove_conversion("time", actor="cli")
        assert removed is not None and removed.url == "http://b:2/mcp"
        assert await store.remove_conversion("time", actor="cli") is None
    async with await StateStore.open(url) as store:
        assert await store.conversions() == {}
