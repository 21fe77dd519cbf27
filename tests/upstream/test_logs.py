"""LogSpan records: proxy.init, proxy.connect, proxy.tool.call fields; no secret value in any record."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from onetool.errors import UpstreamUnavailable
from tests.conftest import spans
from tests.upstream.conftest import fault, open_pool

SECRET = "tok-9f8e7d6c5b4a-secret"


async def test_spans_and_no_secret_anywhere(
    everything_stdio: dict[str, Any], log_records: list[dict[str, Any]]
) -> None:
    servers = {
        "everything": {**everything_stdio, "env": {"API_TOKEN": SECRET}},
        "fx": fault("crash", env={"API_TOKEN": SECRET}),
        "gone": {"command": "no-such-command-onetool", "env": {"API_TOKEN": SECRET}},
        "web": {"url": "http://127.0.0.1:9/mcp", "headers": {"Authorization": f"Bearer {SECRET}"}},
        "off": {**everything_stdio, "enabled": False},
    }
    async with open_pool(servers) as pool:
        assert (await pool.call("fx", "getenv", {"name": "API_TOKEN"})).structured_content == {"result": SECRET}
        await pool.call("everything", "echo", {"message": "x"})
        with pytest.raises(UpstreamUnavailable):
            await pool.call("fx", "crash", {})

    (init,) = spans(log_records, "proxy.init")
    assert {k: init[k] for k in ("serverCount", "connected", "failed", "status")} == {
        "serverCount": 4,
        "connected": 2,
        "failed": 2,
        "status": "SUCCESS",
    }
    connects = {c["server"]: c for c in spans(log_records, "proxy.connect")}
    assert init["toolCount"] == connects["everything"]["toolCount"] + connects["fx"]["toolCount"]
    # 13, and the four it offers a client that can elicit (form and URL mode), sample and list roots, as OneTool can.
    assert connects["everything"]["type"] == "stdio" and connects["everything"]["toolCount"] == 17
    assert connects["everything"]["status"] == "SUCCESS"
    assert connects["web"]["type"] == "http" and connects["web"]["status"] == "FAILED"
    assert connects["gone"]["status"] == "FAILED" and "command not found" in connects["gone"]["errorMessage"]
    assert "off" not in connects

    calls = spans(log_records, "proxy.tool.call")
    getenv = next(c for c in calls if c["tool"] == "getenv")
    assert getenv["resultLength"] == len(f'{{"result": "{SECRET}"}}')  # the length, never the value
    crash = next(c for c in calls if c["tool"] == "crash")
    assert crash["status"] == "FAILED" and crash["errorType"] == "UpstreamUnavailable"

    for r in log_records:
        assert SECRET not in r["message"] and SECRET not in repr(r["extra"]), r


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_a_servers_calls_ask_it_for_the_level_its_listeners_want(mode: str) -> None:
    """The most detailed level a listener wants: on a 2026-era session the call's own opt-in, on a handshake-era
    one logging/setLevel, sent when it changes. Each listener hears its level and above."""
    heard: list[str] = []
    async with open_pool({"fx": fault()}, mode=mode) as pool:

        async def say(level: str) -> str:
            result = await pool.call("fx", "say", {"level": level, "message": level})
            return str((result.structured_content or {})["result"])

        assert await say("info") == "asked for None"  # nobody listens: the server is asked for nothing
        quiet = pool.listen_logs("fx", lambda params: heard.append(f"quiet {params.data}"), "warning")
        chatty = pool.listen_logs("fx", lambda params: heard.append(f"chatty {params.data}"), "debug")
        assert await say("info") == "asked for debug"
        with anyio.fail_after(10):
            while not heard:
                await anyio.sleep(0.01)
        chatty()
        assert await say("info") == "asked for warning"  # dropped by the server itself
        assert await say("error") == "asked for warning"
        with anyio.fail_after(10):
            while len(heard) < 2:
                await anyio.sleep(0.01)
        quiet()
    assert heard == ["chatty info", "quiet error"]
