"""Two hosts: `onetool bridge` on host B, a network namespace the test makes (`ip netns add`, a veth pair with
addresses of its own), and the gateway on host A, this namespace, reaching B only at B's veth address (never this
machine's external address). Over TLS the gateway verifies the bridge's certificate (a throwaway private CA,
trusted through SSL_CERT_FILE); over plain http it needs `bridge.allow_http: true`, and says what that costs.

The converted server is server-everything over stdio (`echo`), the cheapest real one to start, as in
tests/bridge/test_gateway.py."""

from __future__ import annotations

import dataclasses
import os
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from onetool.config import ServerConfig
from onetool.control.bridge_client import BridgeClient
from onetool.errors import BridgeUnavailable
from onetool.upstream.transports import TRUST_FIX
from tests.admin_api import admin, cli
from tests.bridge.conftest import TOKEN, BridgeProcess, Netns, wait_until
from tests.bridge.test_gateway import now, stdio_children, view
from tests.cli_in_one_process import onetool_each
from tests.conftest import EVERYTHING_JS
from tests.gateways import ServedGateway, processes_with, start_http_gateway, stop, write_config
from tests.tls import make_pki

pytestmark = pytest.mark.anyio


def gateway_config(bridge: dict[str, Any] | None, marker: str, secret: str) -> dict[str, Any]:
    env = {"ONETOOL_TEST_MARKER": marker, "ECHO_API_KEY": secret}
    echo = {"command": "node", "args": [str(EVERYTHING_JS), "stdio"], "env": env}
    return {"servers": {"echo": echo}, "sandbox": {"timeout": 30}, **({"bridge": bridge} if bridge else {})}


def gateway_env(ca: Path | None = None) -> dict[str, str]:
    """The bridge comes from the config alone; the CA the gateway trusts besides none is ``ca``."""
    return {"ONETOOL_BRIDGE_URL": "", "ONETOOL_BRIDGE_TOKEN": "", "SSL_CERT_FILE": str(ca) if ca else ""}


def start_gateway(folder: Path, bridge: dict[str, Any], marker: str, secret: str, ca: Path | None) -> ServedGateway:
    folder.mkdir()
    return start_http_gateway(folder, gateway_config(bridge, marker, secret), marker, env=gateway_env(ca))


def on_host_b(bridge: BridgeProcess, netns: Netns) -> tuple[BridgeProcess, str]:
    """The bridge's API as host A reaches it (it printed its bind address, 0.0.0.0), and that base URL."""
    parts = urlsplit(bridge.url)
    base = f"{parts.scheme}://{netns.address}:{parts.port}"
    return dataclasses.replace(bridge, url=base), base


def in_namespace_of(pid: int, other: int) -> bool:
    return os.readlink(f"/proc/{pid}/ns/net") == os.readlink(f"/proc/{other}/ns/net")


async def test_a_tls_bridge_on_another_host_serves_the_gateway_that_trusts_its_ca(
    netns: Netns, bridge_factory: Any, tmp_path: Path
) -> None:
    pki = make_pki(tmp_path / "pki", ips=[netns.address])
    bridge, base = on_host_b(bridge_factory("--host", "0.0.0.0", "--base-port", "0", prefix=netns.exec, pki=pki), netns)
    assert not in_namespace_of(bridge.pid, os.getpid())
    marker, secret = f"th-{uuid.uuid4().hex}", f"secret-{uuid.uuid4().hex}"
    config = {"url": base, "token": TOKEN}

    # A gateway that does not trust the CA refuses the bridge, says why, and changes nothing.
    served = start_gateway(tmp_path / "untrusting", config, marker, secret, ca=None)
    try:
        status, body = admin(served.url, "POST", "/admin/servers/echo/convert")
        assert (status, body["error"]) == (
            503,
            f"bridge unavailable: the TLS certificate of {base} is not trusted (unable to get local issuer "
            f"certificate): {TRUST_FIX}",
        )
        failed = cli("servers", "convert", "echo")
        assert failed.returncode == 1 and "is not trusted" in failed.stderr and "Traceback" not in failed.stderr
        assert (view(served)["type"], view(served)["converted_to"]) == ("stdio", None)
        assert bridge.api("GET", "/convert").json()["count"] == 0
    finally:
        assert stop(served.proc) == 0

    served = start_gateway(tmp_path / "trusting", config, marker, secret, ca=pki.ca)
    try:
        converted = cli("servers", "convert", "echo")
        assert converted.returncode == 0, converted.stderr
        port = bridge.api("GET", "/convert/echo").json()["port"]
        after = view(served)
        assert (after["type"], after["status"]) == ("http", "connected")
        assert after["converted_to"] == f"https://{netns.address}:{port}/mcp"
        await now(served)  # a run(code) call on host A, answered by the server on host B
        assert stdio_children(served) == []
        [child] = bridge.children()
        assert in_namespace_of(child, bridge.pid), "the server runs on host B"
    finally:
        assert stop(served.proc) == 0
    assert bridge.api("DELETE", "/convert/echo").status_code == 200  # a stopped gateway leaves it converted
    wait_until(lambda: not processes_with(marker), what="every server process to end")
    for log in [served.log, tmp_path / "untrusting" / "gateway.log", *tmp_path.glob("bridge-*")]:
        assert secret not in log.read_text() and TOKEN not in log.read_text(), f"a secret reached {log}"


async def test_plain_http_to_a_bridge_on_another_host_needs_allow_http(
    netns: Netns, bridge_factory: Any, tmp_path: Path
) -> None:
    bridge, base = on_host_b(bridge_factory("--host", "0.0.0.0", "--base-port", "0", prefix=netns.exec), netns)
    marker, secret = f"th-{uuid.uuid4().hex}", f"secret-{uuid.uuid4().hex}"

    # Without the opt-in the gateway does not start: the config (or the environment's URL) is refused at load.
    refused_config = write_config(tmp_path, gateway_config({"url": base, "token": TOKEN}, marker, secret))
    (tmp_path / "env").mkdir()
    plain_env = write_config(tmp_path / "env", gateway_config(None, marker, secret))
    # Both refusals in one process (tests/cli_in_one_process.py): nothing starts, so only the imports cost.
    cases = ((refused_config, {}), (plain_env, {"ONETOOL_BRIDGE_URL": base}))
    ran = onetool_each(
        [["serve", "--http", "--port", "0", "--config", str(path)] for path, _ in cases],
        envs=[env for _, env in cases],
        env={**os.environ, **gateway_env()},
    )
    for (_, env), done in zip(cases, ran, strict=True):
        where = "bridge: url" if not env else "$ONETOOL_BRIDGE_URL"
        assert done.returncode == 2, done.stderr
        assert f"{where}: plain http:// to {netns.address} sends tokens and data unencrypted" in done.stderr
        assert "allow_http: true" in done.stderr and "Traceback" not in done.stderr and done.stdout == ""

    # The gateway's client holds the URLs the bridge answers to the same rule: a plain one is stopped there.
    echo = ServerConfig(command="node", args=[str(EVERYTHING_JS), "stdio"])
    with pytest.raises(BridgeUnavailable) as refused:
        await BridgeClient(base, TOKEN).convert("echo", echo)
    assert f"serves 'echo' over plain http at {netns.address}" in str(refused.value)
    assert bridge.api("GET", "/convert").json()["count"] == 0

    allowed = {"url": base, "token": TOKEN, "allow_http": True}
    served = start_gateway(tmp_path / "allowed", allowed, marker, secret, ca=None)
    try:
        converted = cli("servers", "convert", "echo")
        assert converted.returncode == 0, converted.stderr
        port = bridge.api("GET", "/convert/echo").json()["port"]
        assert view(served)["converted_to"] == f"http://{netns.address}:{port}/mcp"
        await now(served)
        warned = [line for line in served.log.read_text().splitlines() if "travel unencrypted" in line]
        assert len(warned) == 1 and " WARNING " in warned[0], warned
        assert f"server 'echo' is reached over plain http at {netns.address} (allow_http: true)" in warned[0]
    finally:
        assert stop(served.proc) == 0
    assert bridge.api("DELETE", "/convert/echo").status_code == 200  # a stopped gateway leaves it converted
    wait_until(lambda: not processes_with(marker), what="every server process to end")
    assert secret not in served.log.read_text() and TOKEN not in served.log.read_text()
