"""`onetool bridge --tls-cert/--tls-key` on loopback: the API and every served URL speak HTTPS; the gateway's two
HTTP paths to it (the /convert client and the pool's MCP connection) verify the certificate, trust a private CA
through SSL_CERT_FILE, and say so clearly when they do not; flags that do not make a server are usage errors."""

from __future__ import annotations

import shutil
import ssl
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest

from onetool.config import ServerConfig
from onetool.control.bridge_client import BridgeClient
from onetool.errors import BridgeUnavailable
from onetool.upstream.transports import TRUST_FIX
from tests.bridge.conftest import TOKEN, BridgeProcess, everything, mcp_client, start_bridge
from tests.cli_in_one_process import onetool_each
from tests.conftest import EVERYTHING_JS
from tests.tls import Pki, client_context, make_pki, write_key
from tests.upstream.conftest import open_pool

pytestmark = pytest.mark.anyio
# server-everything: the cheapest real stdio server to start (which one the bridge serves is not tested here).
ECHO = ServerConfig(command="node", args=[str(EVERYTHING_JS), "stdio"])


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def https_bridge(tmp_path_factory: pytest.TempPathFactory, pki: Pki) -> Iterator[BridgeProcess]:
    """One bridge serving HTTPS with ``pki``'s certificate for the module's tests; each leaves it serving nothing."""
    bridge = start_bridge(tmp_path_factory.mktemp("bridge"), "--base-port", "0", pki=pki)
    yield bridge
    bridge.stop()  # fails the run if it does not stop on SIGTERM


def test_tls_flags_that_do_not_make_a_server_are_usage_errors(tmp_path: Path, pki: Pki) -> None:
    other = write_key(tmp_path / "other-key.pem")
    refusals = {
        ("--tls-cert", str(pki.cert)): "--tls-cert and --tls-key go together",
        ("--tls-key", str(pki.key)): "--tls-cert and --tls-key go together",
        ("--tls-cert", str(pki.cert), "--tls-key", str(other)): f"{other} is not the private key of the certificate",
        ("--tls-cert", str(tmp_path / "none.pem"), "--tls-key", str(pki.key)): "cannot read",
    }
    # The flags are refused before the bridge starts anything: one process runs every refusal (its imports once).
    ran = onetool_each([["bridge", "--port", "0", *args] for args in refusals], timeout=30 * len(refusals))
    for (args, message), done in zip(refusals.items(), ran, strict=True):
        assert done.returncode == 2, (args, done.stderr)
        assert done.stderr.startswith(f"onetool bridge: {message}"), (args, done.stderr)
        assert "Traceback" not in done.stderr and done.stdout == ""


async def test_api_and_served_urls_are_https_for_a_client_that_trusts_the_ca(
    https_bridge: BridgeProcess, pki: Pki
) -> None:
    bridge = https_bridge
    created = bridge.convert(everything("served"))
    try:
        assert created["url"] == f"https://127.0.0.1:{created['port']}/mcp"
        assert bridge.api("GET", "/convert/served").json()["url"] == created["url"]
        async with mcp_client(created["url"], verify=client_context(pki.ca)) as client:
            assert "echo" in {tool.name for tool in (await client.list_tools()).tools}
            echoed = await client.call_tool("echo", {"message": "tls"})
            assert echoed.content[0].text == "Echo: tls"  # type: ignore[union-attr]
    finally:
        assert bridge.api("DELETE", "/convert/served").status_code == 200


async def test_the_gateway_verifies_the_bridge_and_trusts_its_ca_through_ssl_cert_file(
    https_bridge: BridgeProcess, pki: Pki, monkeypatch: pytest.MonkeyPatch, log_records: list[dict[str, Any]]
) -> None:
    bridge = https_bridge
    client = BridgeClient(bridge.url, TOKEN)
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    with pytest.raises(BridgeUnavailable) as untrusted:
        await client.convert("echo", ECHO)
    assert str(untrusted.value) == (
        f"bridge unavailable: the TLS certificate of {bridge.url} is not trusted "
        f"(unable to get local issuer certificate): {TRUST_FIX}"
    )
    assert bridge.api("GET", "/convert").json()["count"] == 0, "refused before anything was sent"

    monkeypatch.setenv("SSL_CERT_FILE", str(pki.ca))
    url = await client.convert("echo", ECHO)
    assert url.startswith("https://127.0.0.1:")

    entry = {"url": url, "headers": {"Authorization": f"Bearer {TOKEN}"}, "connect_timeout": 10}
    async with open_pool({"echo": entry}) as pool:
        assert pool.server_status("echo").connected, pool.server_status("echo")
        result = await pool.call("echo", "echo", {"message": "verified"})
        assert result.content[0].text == "Echo: verified"  # type: ignore[union-attr]
    monkeypatch.delenv("SSL_CERT_FILE")
    async with open_pool({"echo": entry}) as pool:
        status = pool.server_status("echo")
        assert (status.status, status.error) == ("failed", f"the TLS certificate of {url} is not trusted")
        assert (status.detail, status.fix) == ("unable to get local issuer certificate", TRUST_FIX)
    assert not [r for r in log_records if r["traced"]], "a refused certificate is no unexpected error"
    assert all(TOKEN not in r["message"] + repr(r["extra"]) for r in log_records)
    assert bridge.api("DELETE", "/convert/echo").status_code == 200


def readme_recipe() -> str:
    """The shell block that follows ``<!-- two-hosts-recipe -->`` in the README."""
    text = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    block = text.split("<!-- two-hosts-recipe -->", 1)[1].split("```sh\n", 1)[1].split("```", 1)[0]
    assert "openssl" in block
    return block


@pytest.mark.skipif(shutil.which("openssl") is None, reason="no openssl command to run the README's recipe")
async def test_the_readmes_certificate_recipe_makes_a_bridge_a_strict_client_trusts(
    tmp_path: Path, bridge_factory: Any
) -> None:
    """Run as written, but for the bridge's name and address (here: this host's loopback ones)."""
    recipe = readme_recipe().replace("bridge.lan", "localhost").replace("10.0.0.2", "127.0.0.1")
    done = subprocess.run(
        ["bash", "-e"], input=recipe, cwd=tmp_path, capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    pki = Pki(tmp_path / "ca.pem", tmp_path / "bridge.pem", tmp_path / "bridge-key.pem")
    bridge: BridgeProcess = bridge_factory("--base-port", "0", pki=pki)
    strict = client_context(pki.ca)
    strict.verify_flags |= ssl.VERIFY_X509_STRICT  # Python 3.13's default: a CA must carry keyUsage, and more
    for url in (bridge.url, bridge.url.replace("127.0.0.1", "localhost")):
        assert httpx2.get(f"{url}/health", verify=strict, timeout=10).json()["status"] == "ok"
