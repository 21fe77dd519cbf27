"""HTTPS on the HTTP front (what `onetool serve --http` and `onetool bridge` serve with --tls-cert/--tls-key): MCP
works for a client that trusts the CA; the TLS handshake falls under the header deadline and the connection cap
like a request's headers; a certificate and a key that do not make a server are refused, naming the file at fault."""

from __future__ import annotations

import os
import ssl
from pathlib import Path

import anyio
import anyio.abc
import httpx2
import pytest
from anyio.streams.tls import TLSStream
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from onetool.errors import ServeError
from onetool.httpd import server_tls
from onetool.serve import HttpLimits
from onetool.upstream.transports import untrusted_certificate
from tests.admin_api import cli
from tests.cli_in_one_process import onetool_each
from tests.conftest import EVERYTHING_JS
from tests.gateways import start_http_gateway, stop, write_config
from tests.serve.conftest import running_http
from tests.serve.fake_gateway import FakeGateway
from tests.serve.test_limits import HEALTH, PARTIAL_HEADERS, SHORT, connected, is_open, seconds_until_closed
from tests.tls import Pki, client_context, make_pki, write_key

# The first bytes of a TLS record carrying a ClientHello, and no more.
HALF_A_CLIENT_HELLO = b"\x16\x03\x01\x02\x00\x01"


async def everything_until_closed(stream: anyio.abc.ByteStream) -> bytes:
    received = b""
    with anyio.fail_after(5):
        try:
            while True:
                received += await stream.receive()
        except (anyio.EndOfStream, anyio.BrokenResourceError):
            return received


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def tls(pki: Pki) -> ssl.SSLContext:
    return server_tls(pki.cert, pki.key)


async def test_mcp_over_https_for_a_client_that_trusts_the_ca(pki: Pki, tls: ssl.SSLContext) -> None:
    async with running_http(FakeGateway(), tls=tls) as url:
        assert url.startswith("https://127.0.0.1:")
        async with httpx2.AsyncClient(verify=client_context(pki.ca), timeout=10) as http:
            assert (await http.get(url.replace("/mcp", "/health"))).status_code == 200
            async with Client(streamable_http_client(url, http_client=http), read_timeout_seconds=10) as client:
                assert not (await client.call_tool("run", {"code": "1"})).is_error
        # The system's CAs do not know this one: verification fails on the client's side, and says why.
        async with httpx2.AsyncClient(timeout=10) as http:
            with pytest.raises(httpx2.ConnectError) as refused:
                await http.get(url.replace("/mcp", "/health"))
        assert untrusted_certificate(refused.value) == "unable to get local issuer certificate"
        # Plain HTTP to the TLS port is no request: the connection ends without an HTTP answer.
        async with connected(url, HEALTH) as plain:
            assert b"HTTP/1.1" not in await everything_until_closed(plain)


@pytest.mark.parametrize("payload", [b"", HALF_A_CLIENT_HELLO], ids=["nothing", "half a ClientHello"])
async def test_a_handshake_never_finished_is_closed_after_the_header_timeout(
    tls: ssl.SSLContext, payload: bytes
) -> None:
    async with running_http(FakeGateway(), limits=SHORT, tls=tls) as url, connected(url, payload) as stream:
        assert 0.45 <= await seconds_until_closed(stream, bound=5) < 5


async def test_the_header_deadline_runs_from_the_accept_through_the_handshake(pki: Pki, tls: ssl.SSLContext) -> None:
    """A client that waits before its handshake, then sends half its headers, is closed when the deadline set at
    the TCP accept ends: finishing the handshake does not start it again."""
    limits = HttpLimits(header_timeout=1.0)
    async with running_http(FakeGateway(), limits=limits, tls=tls) as url, connected(url) as tcp:
        accepted = anyio.current_time()
        await anyio.sleep(0.6)
        stream = await TLSStream.wrap(tcp, ssl_context=client_context(pki.ca), hostname="localhost")
        handshaken = anyio.current_time()
        await stream.send(PARTIAL_HEADERS)
        assert await everything_until_closed(stream) == b""
        closed = anyio.current_time()
    assert closed - accepted < 3 and closed - handshaken < 0.8


async def test_connections_in_their_handshake_count_against_the_cap(pki: Pki, tls: ssl.SSLContext) -> None:
    """Past the cap a new client is served at once at the cost of the connection that waited longest, even when
    the stalled ones never began TLS (asyncio's own TLS would keep them out of the count for 60 s)."""
    limits = HttpLimits(header_timeout=60, max_connections=3)
    async with (
        running_http(FakeGateway(), limits=limits, tls=tls) as url,
        connected(url) as oldest,
        connected(url) as second,
        connected(url, HALF_A_CLIENT_HELLO) as third,
        httpx2.AsyncClient(verify=client_context(pki.ca), timeout=5) as http,
    ):
        assert (await http.get(url.replace("/mcp", "/health"))).status_code == 200
        assert await seconds_until_closed(oldest, bound=2) < 2
        assert await is_open(second) and await is_open(third)


def test_a_certificate_and_key_that_do_not_make_a_server_are_named(tmp_path: Path, pki: Pki) -> None:
    other = write_key(tmp_path / "other-key.pem")
    encrypted = write_key(tmp_path / "encrypted-key.pem", passphrase=b"secret passphrase")
    junk = tmp_path / "junk.pem"
    junk.write_text("not PEM\n")
    refusals = {
        (pki.cert, other): f"{other} is not the private key of the certificate in {pki.cert}",
        (pki.cert, encrypted): f"{encrypted} is encrypted: give the key without a passphrase",
        (pki.key, pki.key): f"{pki.key} holds no PEM certificate",
        (junk, pki.key): f"{junk} holds no PEM certificate",
        (pki.cert, junk): f"{junk} holds no PEM private key",
        (pki.cert, pki.cert): f"{pki.cert} holds no PEM private key",
        (tmp_path / "missing.pem", pki.key): f"cannot read {tmp_path / 'missing.pem'}: No such file or directory",
        (pki.cert, tmp_path): f"cannot read {tmp_path}: Is a directory",
    }
    for (cert, key), message in refusals.items():
        with pytest.raises(ServeError) as refused:
            server_tls(cert, key)
        assert str(refused.value).startswith(message), (cert, key, str(refused.value))


def test_serve_tls_flags_that_do_not_make_a_server_are_usage_errors(tmp_path: Path, pki: Pki) -> None:
    config = write_config(tmp_path, {"servers": {}})
    refusals = {
        ("--http", "--tls-cert", str(pki.cert)): "--tls-cert and --tls-key go together",
        (
            "--tls-cert",
            str(pki.cert),
            "--tls-key",
            str(pki.key),
        ): "--tls-cert and --tls-key serve HTTPS: they need --http",
        ("--http", "--tls-cert", str(pki.cert), "--tls-key", str(tmp_path / "none.pem")): "cannot read",
    }
    # The flags are refused before the gateway starts anything: one process runs every refusal (its imports once),
    # in the test's folder, as `cli` runs the command.
    commands = [["serve", "--port", "0", "--config", str(config), *args] for args in refusals]
    env = {k: v for k, v in os.environ.items() if k != "ONETOOL_CONFIG"}
    ran = onetool_each(commands, env=env, cwd=tmp_path)
    for (args, message), done in zip(refusals.items(), ran, strict=True):
        assert done.returncode == 2, (args, done.stderr)
        assert done.stderr.startswith(f"onetool serve: {message}"), (args, done.stderr)
        assert "Traceback" not in done.stderr and done.stdout == ""


async def test_serve_over_https_for_mcp_clients_and_the_cli_that_trust_the_ca(tmp_path: Path, pki: Pki) -> None:
    """A team's gateway on TLS: MCP clients, /ui and `onetool run` (attached through the discovery file, trusting
    the private CA through SSL_CERT_FILE as every OneTool client does) all speak HTTPS."""
    echo = {"command": "node", "args": [str(EVERYTHING_JS), "stdio"]}  # the cheapest real upstream to start
    served = start_http_gateway(
        tmp_path, {"servers": {"echo": echo}}, "serve-tls", "--tls-cert", str(pki.cert), "--tls-key", str(pki.key)
    )
    try:
        assert served.url.startswith("https://127.0.0.1:")
        async with httpx2.AsyncClient(verify=client_context(pki.ca), timeout=10) as http:
            assert (await http.get(served.url.replace("/mcp", "/ui/"), follow_redirects=True)).status_code == 200
            async with Client(streamable_http_client(served.url, http_client=http), read_timeout_seconds=30) as client:
                result = await client.call_tool("run", {"code": "echo.echo(message='tls')"})
                assert not result.is_error and result.structured_content == {"result": "Echo: tls"}
        attached = cli(
            "run", "--config", str(tmp_path / "onetool.yaml"), "-c", "6 * 7", env={"SSL_CERT_FILE": str(pki.ca)}
        )
        assert (attached.returncode, attached.stdout) == (0, "42\n"), attached.stderr
        assert served.log.read_text().count("span=run ") == 2  # both ran in the gateway, not standalone
    finally:
        assert stop(served.proc) == 0
