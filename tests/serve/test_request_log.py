"""Every MCP request a face answers is one `mcp.request` record at INFO (method, face, outcome, duration), whatever
its method, on every face, over stdio and HTTP, in both protocol eras: through a real `onetool serve`."""

from __future__ import annotations

import re
import uuid
import warnings
from collections.abc import Iterator
from pathlib import Path

import httpx2
import pytest
from mcp import Client, MCPDeprecationWarning, StdioServerParameters

from tests.gateway.test_hostile_gateway import log_fields
from tests.gateways import ONETOOL, ServedGateway, start_http_gateway, stop, write_config
from tests.serve.fake_gateway import INITIALIZE

pytestmark = pytest.mark.anyio

ERAS = {"legacy": ("initialize", "ping"), "auto": ("server/discover",)}
"""The requests of each era beside the lists: a 2026-07-28 client discovers instead of initializing, and pings no
more."""
LISTS = ("tools/list", "prompts/list", "resources/list", "resources/templates/list")


def requests_in(log: Path, after: int = 0) -> list[dict[str, str]]:
    """The fields of each `mcp.request` record the log holds past its first ``after`` bytes, with its level."""
    lines = log.read_text()[after:].splitlines()
    return [
        {**log_fields(line), "level": line.split()[1]} for line in lines if re.search(r" span=mcp\.request( |$)", line)
    ]


async def speak(client: Client, mode: str) -> None:
    await client.list_tools()
    await client.list_prompts()
    await client.list_resources()
    await client.list_resource_templates()
    if mode == "legacy":
        with warnings.catch_warnings():  # ping is of the handshake era, which this client speaks
            warnings.simplefilter("ignore", MCPDeprecationWarning)
            await client.send_ping()


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServedGateway]:
    folder = tmp_path_factory.mktemp("request-log")
    http = {"enable_direct_endpoint": True, "enable_inspect_endpoint": True}
    gateway = start_http_gateway(folder, {"http": http}, f"request-log-{uuid.uuid4().hex}")
    yield gateway
    assert stop(gateway.proc) == 0


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_every_request_of_every_face_over_http_is_one_record(served: ServedGateway, mode: str) -> None:
    written = served.log.stat().st_size
    for path in ("", "/direct", "/inspect"):
        async with Client(served.url + path, mode=mode, read_timeout_seconds=60) as client:  # type: ignore[arg-type]
            await speak(client, mode)
    seen = [(r["face"], r["method"], r["level"], r["outcome"], r["status"]) for r in requests_in(served.log, written)]
    expected = [
        (face, method, "INFO", "ok", "SUCCESS")
        for face in ("run", "direct", "inspect")
        for method in (*ERAS[mode], *LISTS)
    ]
    assert sorted(seen) == sorted(expected)
    assert all(float(r["duration"]) >= 0 for r in requests_in(served.log, written))


async def test_a_request_that_fails_is_one_record_that_says_so(served: ServedGateway) -> None:
    """An unknown method (the SDK answers METHOD_NOT_FOUND) and a forged one: one line each, cut and escaped."""
    marker = uuid.uuid4().hex
    written = served.log.stat().st_size
    method = f'nope/{marker}" status=SUCCESS\n00:00:00.000 INFO    forged' + "x" * 60_000
    async with httpx2.AsyncClient(timeout=30) as http:
        headers = {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2025-11-25"}
        opened = await http.post(served.url, json=INITIALIZE, headers=headers)
        session = {"Mcp-Session-Id": opened.headers["mcp-session-id"], **headers}
        await http.post(served.url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=session)
        await http.post(served.url, json={"jsonrpc": "2.0", "id": 2, "method": method}, headers=session)
    lines = [line for line in served.log.read_text()[written:].splitlines() if marker in line]
    assert len(lines) == 1 and len(lines[0]) < 1_000
    failed = log_fields(lines[0])
    assert (failed["face"], failed["status"], failed["outcome"]) == ("run", "FAILED", "error")
    assert failed["method"].startswith(f'"nope/{marker}\\" status=SUCCESS\\n')


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_every_request_over_stdio_is_one_record(tmp_path: Path, mode: str) -> None:
    config = write_config(tmp_path, {})
    log = tmp_path / "gateway.log"
    params = StdioServerParameters(command=ONETOOL, args=["serve", "--config", str(config), "--log-file", str(log)])
    async with Client(params, mode=mode, read_timeout_seconds=60) as client:  # type: ignore[arg-type]
        await speak(client, mode)
    seen = sorted((r["face"], r["method"], r["level"], r["outcome"]) for r in requests_in(log))
    assert seen == sorted(("run", method, "INFO", "ok") for method in (*ERAS[mode], *LISTS))
