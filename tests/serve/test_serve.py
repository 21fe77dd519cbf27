"""`onetool serve`: both transports, both protocol eras, clean shutdown with no child left."""

from __future__ import annotations

import os
import resource
import socket
import subprocess
import time
import uuid
from pathlib import Path

import anyio
import httpx2
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from tests.conftest import FIXTURES, PYTHON
from tests.gateways import (
    ONETOOL,
    ServedGateway,
    gateway_config,
    processes_with,
    start_http_gateway,
    stop,
    text_of,
    wait_for_record,
    write_config,
)
from tests.processes import start_and_read_line

pytestmark = pytest.mark.anyio

ERAS = [("auto", "2026-07-28"), ("legacy", "2025-11-25")]


def wait_gone(marker: str, seconds: float = 5.0) -> list[int]:
    deadline = time.monotonic() + seconds
    while (left := processes_with(marker)) and time.monotonic() < deadline:
        time.sleep(0.05)
    return left


@pytest.mark.parametrize(("mode", "era"), ERAS)
async def test_http_serves_one_run_tool_in_both_eras(gateway: ServedGateway, mode: str, era: str) -> None:
    async with Client(gateway.url, mode=mode) as client:  # type: ignore[arg-type]
        assert client.protocol_version == era
        tools = (await client.list_tools()).tools
        assert [t.name for t in tools] == ["run"]
        description = tools[0].description or ""
        assert "\ntime:\n  get_current_time(timezone)" in description
        assert "\nbrave:\n  echo(message)" in description and "\n  get_sum(a, b)" in description
        assert "\n  list_tools(server)" in description
        result = await client.call_tool("run", {"code": "sum(range(10))"})
        assert text_of(result) == "45"


@pytest.mark.parametrize(("mode", "era"), ERAS)
async def test_stdio_serves_both_eras_and_leaves_no_child(tmp_path: Path, mode: str, era: str) -> None:
    marker = f"stdio-{uuid.uuid4().hex}"
    config = write_config(tmp_path, gateway_config(marker))
    params = StdioServerParameters(
        command=ONETOOL, args=["serve", "--config", str(config), "--log-file", str(tmp_path / "log")]
    )
    async with Client(params, mode=mode) as client:  # type: ignore[arg-type]
        assert client.protocol_version == era
        assert [t.name for t in (await client.list_tools()).tools] == ["run"]
        result = await client.call_tool("run", {"code": "time.get_current_time(timezone='UTC')['timezone']"})
        assert text_of(result) == "UTC"
        assert processes_with(marker), "the upstream children should be running"
    assert wait_gone(marker) == []


def test_stdin_eof_shuts_down_cleanly(tmp_path: Path) -> None:
    marker = f"eof-{uuid.uuid4().hex}"
    config = write_config(tmp_path, gateway_config(marker))
    log = tmp_path / "log"
    proc = subprocess.Popen(
        [ONETOOL, "serve", "--config", str(config), "--log-file", str(log)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    wait_for_record(log, "proxy.init")
    assert processes_with(marker)
    out, err = proc.communicate(b"", timeout=15)  # closes stdin
    assert proc.returncode == 0, err.decode()
    assert out == b""  # stdout is the protocol channel: nothing else goes there
    assert wait_gone(marker) == []


def test_sigterm_shuts_down_http_cleanly(tmp_path: Path) -> None:
    marker = f"term-{uuid.uuid4().hex}"
    served = start_http_gateway(tmp_path, gateway_config(marker), marker)
    assert processes_with(marker)
    assert stop(served.proc) == 0
    assert wait_gone(marker) == []


async def test_starts_with_no_config(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "ONETOOL_CONFIG"}
    proc, url = start_and_read_line([ONETOOL, "serve", "--http", "--port", "0"], cwd=tmp_path, env=env)
    try:
        async with Client(url) as client:
            result = await client.call_tool("run", {"code": "proxy.list_servers()"})
            assert result.structured_content["result"] == []
    finally:
        assert stop(proc) == 0


def slow_upstream_config(folder: Path) -> tuple[Path, Path]:
    """A config whose one server is the fault fixture in hang mode behind a shell that first leaves a mark."""
    mark = folder / "upstream-started"
    hang = f"touch {mark} && exec {PYTHON} {FIXTURES / 'fault_server.py'} hang"
    config = {"servers": {"slow": {"command": "sh", "args": ["-c", hang], "connect_timeout": 120}}}
    return write_config(folder, config), mark


@pytest.mark.parametrize(
    ("host", "on_busy_port", "expected"),
    [("127.0.0.1", True, "is already in use"), ("0.0.0.0", False, "without a token")],
)
def test_bind_problems_show_before_any_upstream_starts(
    tmp_path: Path, host: str, on_busy_port: bool, expected: str
) -> None:
    """The port and the token rule are checked first: the error comes at once, and no upstream was started.

    Were the upstream started first, the gateway would wait for its 120 s connect timeout and the run
    below would time out; its mark file would exist.
    """
    config, mark = slow_upstream_config(tmp_path)
    env = {k: v for k, v in os.environ.items() if k != "ONETOOL_TOKEN"}
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1] if on_busy_port else 0
        command = [ONETOOL, "serve", "--http", "--host", host, "--port", str(port), "--config", str(config)]
        proc = subprocess.run(command, capture_output=True, text=True, timeout=30, env=env)
    assert proc.returncode == 1
    assert expected in proc.stderr and f"{host}" in proc.stderr, proc.stderr
    assert not on_busy_port or f"port {port}" in proc.stderr
    assert not mark.exists()


async def test_token_from_the_environment_guards_http(tmp_path: Path) -> None:
    served = start_http_gateway(tmp_path, {}, f"tok-{uuid.uuid4().hex}", env={"ONETOOL_TOKEN": "let-me-in"})
    try:
        async with httpx2.AsyncClient() as http:
            denied = await http.post(served.url, json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
            assert denied.status_code == 401
            assert (await http.get(served.url.replace("/mcp", "/health"))).status_code == 200
        async with (
            httpx2.AsyncClient(headers={"Authorization": "Bearer let-me-in"}) as http,
            Client(streamable_http_client(served.url, http_client=http)) as client,
        ):
            assert text_of(await client.call_tool("run", {"code": "6 * 7"})) == "42"
    finally:
        assert stop(served.proc) == 0
    assert "let-me-in" not in served.log.read_text()


STALLED = 300
FILE_LIMIT = 256  # the gateway's soft RLIMIT_NOFILE: fewer descriptors than stalled connections


def limit_open_files() -> None:
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (FILE_LIMIT, hard))


def closed_by_peer(sock: socket.socket, deadline: float) -> bool:
    sock.settimeout(max(0.01, deadline - time.monotonic()))
    try:
        while sock.recv(4096):
            pass
    except TimeoutError:
        return False
    except ConnectionError:
        pass
    return True


async def test_stalled_connections_do_not_lock_out_clients(tmp_path: Path) -> None:
    """Slowloris: 300 connections that never finish a request line, against a gateway allowed 256 open files.

    A new client still gets /health and a run answered, and the server closes every stalled connection:
    the longest-waiting ones as the connection cap (half the file limit) fills, the rest at the 10 s
    header timeout.
    """
    served = start_http_gateway(tmp_path, {}, f"slow-{uuid.uuid4().hex}", preexec_fn=limit_open_files)
    address = ("127.0.0.1", int(served.url.split(":")[2].split("/")[0]))
    stalled: list[socket.socket] = []
    try:
        for _ in range(STALLED):
            sock = socket.create_connection(address, timeout=10)
            stalled.append(sock)
            sock.sendall(b"GET /mcp HTT")
        with anyio.fail_after(20):
            async with httpx2.AsyncClient(timeout=20) as http:
                assert (await http.get(served.url.replace("/mcp", "/health"))).status_code == 200
            assert text_of(await served.run("1+1")) == "2"
        deadline = time.monotonic() + 30  # the 10 s header timeout, generously
        assert [closed_by_peer(sock, deadline) for sock in stalled] == [True] * STALLED
    finally:
        for sock in stalled:
            sock.close()
        assert stop(served.proc) == 0
