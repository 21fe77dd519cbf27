"""The /convert API of a real `onetool bridge` process: every status code, the token, ports and limits.

The servers converted are server-everything over stdio, the cheapest real one to start: the API does not depend on
which server it runs (tests/bridge/test_mcp.py serves servers of both eras)."""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any

import httpx2
import pytest

from tests.bridge.conftest import ONETOOL, TOKEN, BridgeProcess, everything, process_groups
from tests.conftest import free_port
from tests.processes import start_and_read_line, stop


def test_convert_get_list_delete(bridge: BridgeProcess) -> None:
    created = bridge.convert(everything("api-everything"))
    assert created["serverName"] == "api-everything"
    assert created["status"] == "running"
    assert created["url"] == f"http://127.0.0.1:{created['port']}/mcp"
    children = set(bridge.children())
    assert children, "the stdio server runs as a child of the bridge"

    one = bridge.api("GET", "/convert/api-everything")
    assert one.status_code == 200 and one.json() == created
    listed = bridge.api("GET", "/convert").json()
    assert created in listed["servers"] and listed["count"] == len(listed["servers"])
    assert bridge.api("GET", "/health").json() == {"status": "ok", "servers": listed["count"]}

    deleted = bridge.api("DELETE", "/convert/api-everything")
    assert deleted.status_code == 200 and deleted.json() == {"serverName": "api-everything", "status": "stopped"}
    assert process_groups(children) == [], "DELETE leaves no process of the server"
    assert not children & set(bridge.children())

    for method in ("GET", "DELETE"):
        gone = bridge.api(method, "/convert/api-everything")
        assert gone.status_code == 404 and "api-everything" in gone.json()["error"]


def test_converting_twice_is_409_with_the_running_url(bridge: BridgeProcess) -> None:
    created = bridge.convert(everything("api-twice"))
    again = bridge.api("POST", "/convert", json=everything("api-twice"))
    assert again.status_code == 409
    assert again.json()["url"] == created["url"] and "already converted" in again.json()["error"]
    assert bridge.api("DELETE", "/convert/api-twice").status_code == 200


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"command": "node", "args": []}, "serverName"),
        ({"serverName": "x", "args": []}, "command"),
        ({"serverName": "x", "command": "node"}, "args"),
        ({"serverName": "a/b", "command": "node", "args": []}, "serverName"),
        ({"serverName": "x", "command": 7, "args": []}, "command"),
        ({"serverName": "x", "command": "node", "args": "index.js"}, "args"),
        ({"serverName": "x", "command": "node", "args": ["a", 2]}, "args[1]"),
        ({"serverName": "x", "command": "node", "args": [], "env": {"TOKEN": 12345}}, "env.TOKEN"),
        ({"serverName": "x", "command": "node", "args": [], "env": ["A=1"]}, "env"),
        ({"serverName": "x", "command": "node", "args": [], "timeout": -1}, "timeout"),
        ({"serverName": "x", "command": "node", "args": [], "cwd": "/tmp"}, "cwd"),
        ({"serverName": "x", "command": "node", "args": ["${BRIDGE_TEST_UNSET_VARIABLE}"]}, "args"),
        (["not", "an", "object"], "body"),
    ],
)
def test_bad_request_names_the_field(bridge: BridgeProcess, body: Any, field: str) -> None:
    response = bridge.api("POST", "/convert", json=body)
    assert response.status_code == 400, response.text
    assert response.json()["field"] == field
    assert field.split("[")[0].split(".")[0] in response.json()["error"]
    assert "12345" not in response.text, "a value is never echoed: it may be a secret"


def test_body_must_be_json(bridge: BridgeProcess) -> None:
    wrong_type = bridge.api("POST", "/convert", content=b"{}", headers={"Content-Type": "text/plain"})
    assert wrong_type.status_code == 415
    broken = bridge.api("POST", "/convert", content=b"{", headers={"Content-Type": "application/json"})
    assert broken.status_code == 400 and broken.json()["field"] == "body"


@pytest.mark.parametrize(
    ("command", "args", "reason"),
    [
        (
            "no-such-command-for-the-bridge",
            [],
            "cannot start server 'broken': command not found: no-such-command-for-the-bridge; install "
            "no-such-command-for-the-bridge, or set the request's command to its full path",
        ),
        (
            "/nonexistent/onetool-bridge/server",
            [],
            "cannot start server 'broken': command not found: server; set the request's command to the server's "
            "executable (a full path, or a name on PATH)",
        ),
        (
            sys.executable,
            ["-c", "import sys; sys.exit(3)"],
            "cannot start server 'broken': process exited with status 3; its process exits at start: see its stderr "
            "in OneTool's log; check the request's command/args/env",
        ),
    ],
)
def test_a_process_that_cannot_start_is_500_with_the_reason(
    bridge: BridgeProcess, command: str, args: list[str], reason: str
) -> None:
    secret = "do-not-show-this-value"
    body = {"serverName": "broken", "command": command, "args": args, "env": {"SECRET": secret}}
    response = bridge.api("POST", "/convert", json=body)
    assert response.status_code == 500
    assert response.json()["error"] == reason  # an API request has no config keys (servers.broken.command)
    assert secret not in response.text
    assert bridge.api("GET", "/convert/broken").status_code == 404, "nothing is left of a failed start"
    assert bridge.children() == {}


def test_everything_needs_the_token_but_health(bridge: BridgeProcess) -> None:
    created = bridge.convert(everything("api-token"))
    for headers in ({}, {"Authorization": "Bearer wrong-token"}):
        token = headers.get("Authorization", "").removeprefix("Bearer ") or None
        for method, path in (("GET", "/convert"), ("GET", "/convert/api-token"), ("DELETE", "/convert/api-token")):
            assert bridge.api(method, path, token=token).status_code == 401
        assert bridge.api("POST", "/convert", token=token, json=everything("other")).status_code == 401
        assert httpx2.post(created["url"], json={}, headers=headers).status_code == 401, "the served MCP URL too"
    assert bridge.api("GET", "/health", token=None).status_code == 200
    assert bridge.api("DELETE", "/convert/api-token").status_code == 200


def test_ports_from_the_base_port_upward_and_max_servers_is_429(bridge_factory: Any) -> None:
    """One bridge for both limits: ports are given out from --base-port upward (a freed one again), and a convert
    past --max-servers is 429 until one is deleted."""
    base = free_port()
    bridge: BridgeProcess = bridge_factory("--base-port", str(base), "--max-servers", "2")
    first = bridge.convert(everything("p1"))
    second = bridge.convert(everything("p2"))
    assert first["port"] == base
    assert second["port"] > base
    full = bridge.api("POST", "/convert", json=everything("p3"))
    assert full.status_code == 429 and "--max-servers" in full.json()["error"]
    bridge.api("DELETE", "/convert/p1")
    third = bridge.api("POST", "/convert", json=everything("p3"))
    assert third.status_code == 201, third.text
    assert third.json()["port"] == base, "a freed port is given out again"


def test_refuses_to_start_without_a_token_off_loopback() -> None:
    env = {k: v for k, v in os.environ.items() if k != "ONETOOL_BRIDGE_TOKEN"}
    result = subprocess.run(
        [ONETOOL, "bridge", "--host", "0.0.0.0", "--port", "0"], capture_output=True, text=True, env=env, timeout=60
    )
    assert result.returncode == 1
    assert "without a token" in result.stderr and "--token" in result.stderr


def test_without_a_token_only_loopback_clients(bridge_factory: Any) -> None:
    bridge: BridgeProcess = bridge_factory("--base-port", "0", token=None)
    assert bridge.api("GET", "/convert").status_code == 200
    # The HTTP front's one Host and Origin rule: a DNS-rebinding page's Host (421), another site's Origin (403).
    rebinding = bridge.api("GET", "/convert", headers={"Host": "attacker.example"})
    assert rebinding.status_code == 421
    cross_site = bridge.api("POST", "/convert", json=everything(), headers={"Origin": "https://attacker.example"})
    assert cross_site.status_code == 403
    other_port = bridge.api("POST", "/convert", json=everything(), headers={"Origin": "http://127.0.0.1:1"})
    assert other_port.status_code == 403
    assert bridge.children() == {}


def test_token_from_the_environment() -> None:
    env = {**os.environ, "ONETOOL_BRIDGE_TOKEN": TOKEN}
    command = [ONETOOL, "bridge", "--host", "0.0.0.0", "--port", "0", "--base-port", "0"]
    process, line = start_and_read_line(command, env=env)
    try:
        url = line.replace("0.0.0.0", "127.0.0.1")
        assert httpx2.get(f"{url}/convert").status_code == 401
        assert httpx2.get(f"{url}/convert", headers={"Authorization": f"Bearer {TOKEN}"}).status_code == 200
    finally:
        stop(process)
