"""Convert and revert from a running gateway (`onetool serve --http`) through a real `onetool bridge`: the pack
stays, a bridge restart heals without an admin action, a gateway restart reconnects at the stored URL, a failing
bridge changes nothing, revert and remove do not wait for an unreachable bridge (it is told later), env values
are never logged, and no process is left behind.

The converted server is server-everything over stdio (`echo`): which stdio server the bridge runs is not what
these tests check (tests/bridge/test_mcp.py serves servers of both eras through the bridge), and it is the
cheapest real one to start, which these tests do many times."""

from __future__ import annotations

import json
import time
import urllib.request
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import anyio
import pytest
from mcp import types

from tests.admin_api import admin, cli, origin
from tests.bridge.conftest import TOKEN, BridgeProcess, Relay, wait_until
from tests.conftest import EVERYTHING_JS, free_port
from tests.gateways import ServedGateway, processes_with, start_http_gateway, stop, text_of
from tests.upstream.conftest import _stat

ECHO = "echo.echo(message='ping')"


def config(marker: str, secret: str, bridge_url: str | None) -> dict[str, Any]:
    env = {"ONETOOL_TEST_MARKER": marker, "ECHO_API_KEY": secret}
    servers = {
        "echo": {"command": "node", "args": [str(EVERYTHING_JS), "stdio"], "env": env},
        "broken-server": {"command": "/nonexistent/mcp-server", "connect_timeout": 5},
        "remote": {"url": "http://127.0.0.1:9/mcp", "enabled": False},
    }
    bridge = {"bridge": {"url": bridge_url, "token": TOKEN}} if bridge_url else {}
    return {"servers": servers, "sandbox": {"timeout": 30}, **bridge}


def gateway(tmp: Path, marker: str, secret: str, bridge_url: str | None) -> ServedGateway:
    # The bridge comes from the config alone, never from the test runner's environment.
    env = {"ONETOOL_BRIDGE_URL": "", "ONETOOL_BRIDGE_TOKEN": ""}
    return start_http_gateway(tmp, config(marker, secret, bridge_url), marker, env=env)


def view(served: ServedGateway, name: str = "echo") -> dict[str, Any]:
    status, body = admin(served.url, "GET", f"/admin/servers/{name}")
    assert status == 200, body
    return dict(body)


async def now(served: ServedGateway, within: float = 60.0) -> float:
    """Run a call through `echo` until it works; the seconds that took."""
    started = time.monotonic()
    result: types.CallToolResult | None = None
    while time.monotonic() - started < within:
        result = await served.run(ECHO)
        if not result.is_error:
            assert text_of(result) == "Echo: ping"
            return time.monotonic() - started
        await anyio.sleep(0.2)
    raise AssertionError(f"`echo` did not answer within {within} s: {result}")


def stdio_children(served: ServedGateway) -> list[int]:
    """The gateway's own children that carry the test's marker: stdio servers it started itself."""
    return [pid for pid in processes_with(served.marker) if (st := _stat(pid)) and st[1] == served.proc.pid]


@pytest.mark.anyio
async def test_convert_survives_bridge_and_gateway_restarts_then_reverts(tmp_path: Path, bridge_factory: Any) -> None:
    marker, secret = f"bw-{uuid.uuid4().hex}", f"secret-{uuid.uuid4().hex}"
    port, base = str(free_port()), free_port()
    bridge: BridgeProcess = bridge_factory("--port", port, "--base-port", str(base))
    served = gateway(tmp_path, marker, secret, bridge.url)
    try:
        assert admin(served.url, "POST", "/admin/servers/echo/approve")[0] == 200
        converted = cli("servers", "convert", "echo")
        url = f"http://127.0.0.1:{base}/mcp"
        assert converted.returncode == 0 and url in converted.stdout, converted.stderr
        after = view(served)
        assert (after["pack"], after["type"], after["status"]) == ("echo", "http", "connected")
        assert after["converted_to"] == url
        assert not after["quarantined"] and after["held"] == [], "the approval survives the new connection"
        await now(served)
        assert stdio_children(served) == [] and len(bridge.children()) == 1, "the bridge runs it, not the gateway"
        with urllib.request.urlopen(f"{origin(served.url)}/status") as response:
            status = {s["name"]: s for s in json.load(response)["servers"]}
        assert status["echo"]["converted_to"] == url and status["broken-server"]["converted_to"] is None
        assert "CONVERTED TO" in cli("servers").stdout

        # The bridge restarts on the same ports and forgets everything; the gateway notices and re-registers.
        bridge.stop()
        bridge = bridge_factory("--port", port, "--base-port", str(base))
        healed = await now(served)
        print(f"back {healed:.1f} s after the bridge restarted")
        assert view(served)["converted_to"] == url

        # A gateway restart connects the stored URL; a bridge that came back elsewhere moves it there.
        assert stop(served.proc) == 0
        bridge.stop()
        moved_base = free_port()
        bridge = bridge_factory("--port", port, "--base-port", str(moved_base))
        served = gateway(tmp_path, marker, secret, bridge.url)
        await now(served)
        assert view(served)["converted_to"] == f"http://127.0.0.1:{moved_base}/mcp"

        reverted = cli("servers", "revert", "echo")
        assert reverted.returncode == 0, reverted.stderr
        back = view(served)
        assert (back["type"], back["status"], back["converted_to"], back["held"]) == ("stdio", "connected", None, [])
        assert bridge.api("GET", "/convert/echo").status_code == 404
        wait_until(lambda: not bridge.children(), what="the bridge's child to end")
        await now(served)
        assert len(stdio_children(served)) == 1
        again = admin(served.url, "POST", "/admin/servers/echo/revert")
        assert again[0] == 409 and "not converted" in again[1]["error"]

        # Removing a converted server (one added at run time) stops it on the bridge too.
        spec = config(marker, secret, None)["servers"]["echo"]
        assert admin(served.url, "POST", "/admin/servers", {"name": "twin", "spec": spec})[0] == 201
        assert admin(served.url, "POST", "/admin/servers/twin/convert")[0] == 200
        assert bridge.api("GET", "/convert/twin").status_code == 200
        assert admin(served.url, "DELETE", "/admin/servers/twin")[0] == 200
        assert bridge.api("GET", "/convert/twin").status_code == 404
        wait_until(lambda: not bridge.children(), what="the removed server's process to end")
    finally:
        assert stop(served.proc) == 0
        bridge.stop()
    wait_until(lambda: not processes_with(marker), what="every server process to end")
    logs = [served.log, *tmp_path.glob("bridge-*")]
    assert all(secret not in path.read_text() for path in logs), "an env value reached a log"


@pytest.mark.anyio
async def test_a_failing_bridge_changes_nothing_and_revert_and_remove_do_not_wait_for_an_unreachable_bridge(
    tmp_path: Path, bridge_factory: Any
) -> None:
    """One gateway whose only way to its bridge is a relay the test cuts and restores. A failing bridge changes
    nothing: one it cannot reach (the relay cut) and one that cannot start the command (its 500) are both
    unavailable (503), and a http server is refused (400). Revert and remove do not wait for an unreachable bridge:
    it is told once it is back, and a stop still owed at shutdown does not hold the shutdown up."""
    marker, secret = f"bw-{uuid.uuid4().hex}", f"secret-{uuid.uuid4().hex}"
    bridge: BridgeProcess = bridge_factory("--base-port", "0")
    api = urlsplit(bridge.url)
    relay = Relay((str(api.hostname), int(api.port or 0)))  # the gateway's only way to the bridge
    relay.cut()  # nothing listens at the bridge URL the gateway has
    served = gateway(tmp_path, marker, secret, relay.url)

    def bridged() -> set[str]:
        return {s["serverName"] for s in bridge.api("GET", "/convert").json()["servers"]}

    try:
        status, body = admin(served.url, "POST", "/admin/servers/echo/convert")
        assert status == 503 and body["error"].startswith("bridge unavailable: cannot reach"), body
        assert (view(served)["type"], view(served)["converted_to"]) == ("stdio", None)
        failed = cli("servers", "convert", "echo")
        assert failed.returncode == 1 and "bridge unavailable" in failed.stderr
        await now(served)
        status, body = admin(served.url, "POST", "/admin/servers/remote/convert")
        assert status == 400 and body["error"] == "only stdio servers can be converted; 'remote' is a http server"

        # A bridge that cannot start the command (its 500) is unavailable to the gateway too.
        relay.restore()
        status, body = admin(served.url, "POST", "/admin/servers/broken-server/convert")
        assert status == 503 and "bridge unavailable" in body["error"], body
        assert view(served, "broken-server")["converted_to"] is None
        assert bridge.api("GET", "/convert").json()["count"] == 0
        assert (view(served)["type"], view(served)["converted_to"]) == ("stdio", None)

        # Revert and remove do not wait for a bridge out of reach.
        assert admin(served.url, "POST", "/admin/servers/echo/approve")[0] == 200
        spec = config(marker, secret, None)["servers"]["echo"]
        assert admin(served.url, "POST", "/admin/servers", {"name": "twin", "spec": spec})[0] == 201
        for name in ("echo", "twin"):
            status, body = admin(served.url, "POST", f"/admin/servers/{name}/convert")
            assert status == 200, body
        assert bridged() == {"echo", "twin"}

        relay.cut()  # the bridge still runs both, but the gateway cannot reach it
        status, body = admin(served.url, "POST", "/admin/servers/echo/revert")
        assert status == 200, body
        assert (body["type"], body["converted_to"]) == ("stdio", None)
        status, body = admin(served.url, "DELETE", "/admin/servers/twin")
        assert (status, body) == (200, {"removed": "twin"})
        assert admin(served.url, "GET", "/admin/servers/twin")[0] == 404
        await now(served)
        assert len(stdio_children(served)) == 1, "reverted: the gateway runs `echo` itself again"
        assert bridged() == {"echo", "twin"}, "the bridge was not told yet"
        log = served.log.read_text()
        for name in ("echo", "twin"):
            assert f"server '{name}' is reverted here, but the bridge did not stop it" in log
        status, body = admin(served.url, "POST", "/admin/servers/echo/convert")
        assert status == 503 and "bridge unavailable" in body["error"], body

        relay.restore()  # the gateway's retries reach it: both stop there, with no admin action
        wait_until(lambda: not bridged(), timeout=20, what="the bridge to be told to stop both")
        wait_until(lambda: not bridge.children(), what="the bridge's processes to end")
        assert view(served)["type"] == "stdio"

        # A stop still owed when the gateway shuts down: the shutdown does not wait for it, and says so.
        assert admin(served.url, "POST", "/admin/servers/echo/convert")[0] == 200
        relay.cut()
        assert admin(served.url, "POST", "/admin/servers/echo/revert")[0] == 200
        started = time.monotonic()
        assert stop(served.proc) == 0
        assert time.monotonic() - started < 8
        assert "the bridge was never told to stop 'echo'" in served.log.read_text()
        assert bridged() == {"echo"}
    finally:
        relay.cut()
        if served.proc.poll() is None:
            assert stop(served.proc) == 0
        bridge.stop()
    wait_until(lambda: not processes_with(marker), what="every server process to end")
    assert all(secret not in path.read_text() for path in [served.log, *tmp_path.glob("bridge-*")])


@pytest.mark.anyio
async def test_without_a_bridge_convert_says_none_is_configured(tmp_path: Path) -> None:
    """(Part of "a failing bridge changes nothing": no bridge at all is a 400 that says what to set.)"""
    marker = f"bw-{uuid.uuid4().hex}"
    served = gateway(tmp_path, marker, "s", None)
    try:
        status, body = admin(served.url, "POST", "/admin/servers/echo/convert")
        assert status == 400 and body["error"].startswith("cannot convert 'echo': no bridge is configured"), body
        assert (view(served)["type"], view(served)["converted_to"]) == ("stdio", None)
    finally:
        assert stop(served.proc) == 0
    wait_until(lambda: not processes_with(marker), what="every server process to end")
