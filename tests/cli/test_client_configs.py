"""Client configs (the mcpServers layout) served for real: the example files, `onetool run` and `serve`."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from mcp import Client

from onetool.config import load_config
from onetool.core.gateway import Gateway
from tests.cli.test_cli import onetool
from tests.gateways import start_http_gateway, stop, text_of

pytestmark = pytest.mark.anyio

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "clients"


def test_onetool_run_against_a_claude_desktop_file(tmp_path: Path) -> None:
    """`--config claude_desktop_config.json` just works: server-everything and mcp-server-time over stdio."""
    proc = onetool(
        "run",
        "--config",
        str(EXAMPLES / "claude_desktop_config.json"),
        "-c",
        "[everything.echo(message='hi'), time.get_current_time(timezone='UTC')['timezone']]",
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == '["Echo: hi","UTC"]\n'


@pytest.mark.parametrize(
    ("name", "code", "expected"),
    [
        (
            "claude_code.mcp.json",
            "[everything.echo(message='a'), everything_http.echo(message='b'), everything_sse.echo(message='c')]",
            ["Echo: a", "Echo: b", "Echo: c"],
        ),
        ("cursor_mcp.json", "everything.get_sum(a=1, b=2)", "The sum of 1 and 2 is 3."),
        ("cline_mcp_settings.json", "time.get_current_time(timezone='UTC')['timezone']", "UTC"),
    ],
)
async def test_every_example_serves(
    everything_http: str, everything_sse: str, name: str, code: str, expected: object
) -> None:
    environ = {**os.environ, "EVERYTHING_HTTP_URL": everything_http, "EVERYTHING_SSE_URL": everything_sse}
    config = load_config(EXAMPLES / name, environ=environ)
    async with Gateway(config, warm_workers=1) as gw:
        status = await gw.run("{s['name']: s['status'] for s in proxy.list_servers()}")
        result = await gw.run(code)
    assert not result.is_error, text_of(result)
    assert result.structured_content == {"result": expected}
    assert status.structured_content is not None
    assert {n: s for n, s in status.structured_content["result"].items() if s != "disabled"} == {
        n: "connected" for n, s in config.servers.items() if s.enabled
    }


async def test_serve_an_mcp_servers_file_over_http(tmp_path: Path, everything_http: str) -> None:
    """`onetool serve` with an mcpServers file (here YAML): an MCP client sees that file's servers."""
    servers = {
        "everything": {"type": "http", "url": "${EVERYTHING_HTTP_URL}"},
        "time": {"type": "stdio", "command": "mcp-server-time", "autoApprove": ["get_current_time"]},
    }
    served = start_http_gateway(tmp_path, {"mcpServers": servers}, "", env={"EVERYTHING_HTTP_URL": everything_http})
    try:
        async with Client(served.url, read_timeout_seconds=60) as client:
            (tool,) = (await client.list_tools()).tools
        assert tool.description is not None and "\n  get_sum(a, b)" in tool.description
        result = await served.run("time.get_current_time(timezone='Asia/Tokyo')['timezone']")
        assert result.structured_content == {"result": "Asia/Tokyo"}, text_of(result)
    finally:
        stop(served.proc)
    assert "ignoring mcpServers.time.autoApprove (a client setting OneTool does not use)" in served.log.read_text()
