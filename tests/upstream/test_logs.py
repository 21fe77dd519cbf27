"""LogSpan records: proxy.init, proxy.connect, proxy.tool.call fields; no secret value in any record."""

from __future__ import annotations

from typing import Any

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
