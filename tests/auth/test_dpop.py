"""DPoP (RFC 9449, ``oauth.dpop: true``) against the OAuth fixture in its ``--dpop`` mode, which verifies every proof
for real (signature with its jwk, htm/htu, ath, jti replay, its nonce) and binds each token to the proof's key
(``cnf.jkt``): through a real `onetool serve` gateway with the authorization code (and a refresh) and with client
credentials, the nonce asked for by the token endpoint and by the MCP server, the key shared by every process on the
token store, and the clear failures: a Bearer token where DPoP was asked, a proof the server refuses.

Each OAuth fixture server costs a process start, so the tests that need no short token life share one module server
(``--dpop --ttl 600``, with the identity provider's key): they count its grants and challenges as differences, and
a test that changes what it accepts puts it back."""

from __future__ import annotations

import json
import os
import re
import subprocess
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest

from onetool.auth import FileTokenStore, ServerStorage
from onetool.auth.dpop import DPoPKey
from onetool.config import OAuthConfig, ServerConfig
from onetool.errors import UpstreamUnavailable
from onetool.state.paths import project_key
from onetool.upstream import ServerStatus, UpstreamPool
from tests.auth.conftest import SharedStore
from tests.auth.test_machine_grants import Keys, delta, idp_token, keys  # noqa: F401 (fixture)
from tests.gateways import ONETOOL, ServedGateway, auth_command, start_http_gateway, stop, text_of
from tests.state.conftest import sqlite_execute
from tests.upstream.test_oauth import OAuthServer, fetch, oauth_server, start_server  # noqa: F401 (fixture)


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[Callable[[dict[str, Any]], ServedGateway]]:
    started: list[ServedGateway] = []

    def start(config: dict[str, Any]) -> ServedGateway:
        started.append(start_http_gateway(tmp_path, config, f"gw-{uuid.uuid4().hex}"))
        return started[-1]

    yield start
    for served in started:
        stop(served.proc)


FX_TTL = 6
"""Seconds `fx`'s tokens live: one refresh, and its token then outlives the call that needed it on a busy machine
(2 s did not: a second refresh followed)."""


@pytest.fixture(scope="module")
def dpop_server(keys: Keys) -> Iterator[OAuthServer]:  # noqa: F811
    """The module's DPoP fixture server: tokens live 10 minutes (no expiry within a test: each nonce challenge a
    test counts is the only one), and it trusts the identity provider's key (``keys``) for presented tokens."""
    with oauth_server("--dpop", "--ttl", "600", "--idp-key", str(keys.client.parent / "idp.pub")) as started:
        yield started


@contextmanager
def accepting(server: OAuthServer, algs: str) -> Iterator[None]:
    """The server accepts only ``algs`` proofs while inside (``--dpop-algs``), ES256 again afterwards."""
    server.hook("dpop-algs", "POST", algs)
    try:
        yield
    finally:
        server.hook("dpop-algs", "POST", "ES256")


def bound_since(server: OAuthServer, before: list[str]) -> list[str]:
    """The keys (``cnf.jkt``) the server bound tokens to since it had bound them to ``before`` (its dpop-bound then):
    the keys of this test, as each test (each process) has a key of its own."""
    now = list(server.hook("dpop-bound"))
    assert set(before) <= set(now)
    return sorted(set(now) - set(before))


def stored_key(home: Path, server: str) -> str:
    """The DPoP key in the server's record of the gateway's state store."""
    db = Path(os.environ["ONETOOL_STATE_DIR"]) / "projects" / project_key(home / "onetool.yaml") / "onetool.db"
    rows = sqlite_execute(db, f"SELECT record FROM oauth_tokens WHERE server = '{server}'")
    key = json.loads(str(rows[0][0]))["dpop_key"]
    assert isinstance(key, str)
    return key


def assert_no_secret_in(text: str, server: OAuthServer, key: str) -> None:
    assert [s for s in server.hook("secrets") if s in text] == []
    assert [line for line in key.splitlines()[1:-1] if line in text] == []  # no line of the private key


async def test_authorization_code_nonce_binding_and_refresh_and_client_credentials_through_the_gateway_and_auth_status(
    start_server: Callable[..., OAuthServer],  # noqa: F811
    dpop_server: OAuthServer,
    serve: Callable[[dict[str, Any]], ServedGateway],
    tmp_path: Path,
) -> None:
    """One gateway, two DPoP servers: `fx` with the authorization code (and a refresh, its tokens living FX_TTL
    seconds), `m2m` with client credentials (the module's server); then `onetool auth status` of both."""
    server = start_server("--dpop", "--ttl", str(FX_TTL))
    cc = dpop_server
    oauth = {"client_id": "cc-client", "client_secret": "cc-secret", "issuer": cc.base, "dpop": True}
    cc_before, cc_bound = cc.hook("stats"), list(cc.hook("dpop-bound"))
    served = serve(
        {
            "servers": {
                "fx": {"url": server.url, "oauth": {"dpop": True}, "connect_timeout": 5},
                "m2m": {"url": cc.url, "oauth": oauth, "connect_timeout": 5},
            }
        }
    )

    # Client credentials: connected at start, one grant, and the token endpoint's nonce serves the MCP server too.
    assert text_of(await served.run("m2m.add(a=20, b=22)")) == "42"
    stats = delta(cc_before, cc.hook("stats"))
    assert stats["client_credentials"] == 1 and stats["dpop_nonce_challenge:token"] == 1
    assert "dpop_nonce_challenge:resource" not in stats
    cc.hook("dpop-nonce", "POST")  # a new nonce: the MCP server asks for it, and the call is sent again
    assert text_of(await served.run("m2m.add(a=1, b=1)")) == "2"
    stats = delta(cc_before, cc.hook("stats"))
    assert stats["dpop_nonce_challenge:resource"] == 1 and stats["client_credentials"] == 1  # no new grant
    cc_key = stored_key(tmp_path, "m2m")
    assert bound_since(cc, cc_bound) == [DPoPKey(cc_key).thumbprint]

    # The authorization code, through the running gateway.
    with auth_command(tmp_path / "onetool.yaml", "fx", {**os.environ, "LOG_LEVEL": "WARNING"}) as (url, proc):
        page = fetch(url)
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0 and page.status_code == 200, (out, err)
    assert text_of(await served.run("fx.add(a=1, b=2)")) == "3"
    before = server.hook("stats")
    assert before["authorization_code"] == 1 and before["dpop_nonce_challenge:token"] >= 1  # the code exchange's
    assert before["dpop_bound_request"] >= 1 and "dpop_replay" not in before

    await anyio.sleep(FX_TTL + 0.5)  # expired: the refresh is proved with the key its refresh token is bound to
    server.hook("dpop-nonce", "POST")  # with a nonce it does not know yet: one retry, wherever it meets it first
    assert text_of(await served.run("fx.add(a=2, b=2)")) == "4"
    after = server.hook("stats")
    assert after["refresh_token"] == 1 and "refused_bound_refresh" not in after and "refused_refresh" not in after
    challenges = ("dpop_nonce_challenge:token", "dpop_nonce_challenge:resource")
    assert sum(after.get(c, 0) - before.get(c, 0) for c in challenges) == 1

    key = stored_key(tmp_path, "fx")
    assert server.hook("dpop-bound") == [DPoPKey(key).thumbprint]  # every token bound to the record's key
    stop(served.proc)
    log = served.log.read_text()
    assert_no_secret_in(log, server, key)
    assert_no_secret_in(log, cc, cc_key)

    config = str(tmp_path / "onetool.yaml")
    status = subprocess.run(
        [ONETOOL, "auth", "status", "--config", config], capture_output=True, text=True, timeout=60, check=False
    )
    rows = status.stdout.splitlines()
    assert rows[0].split()[:3] == ["NAME", "GRANT", "DPOP"]
    assert re.search(r"^m2m\s+client_credentials\s+true\s+authenticated\s", status.stdout, re.M), rows
    assert_no_secret_in(log + status.stdout + status.stderr, cc, cc_key)


async def m2m_status(server: OAuthServer, tmp_path: Path) -> ServerStatus:
    """The status of a client-credentials server with dpop: true, after its first connection attempt."""
    oauth = OAuthConfig(client_id="cc-client", client_secret="cc-secret", issuer=server.base, dpop=True)
    config = ServerConfig(url=server.url, oauth=oauth, connect_timeout=5)
    async with UpstreamPool({"m2m": config}, token_store=FileTokenStore(tmp_path / "oauth")) as pool:
        return pool.server_status("m2m")


async def test_a_bearer_token_is_refused_when_dpop_is_asked(
    start_server: Callable[..., OAuthServer],  # noqa: F811
    tmp_path: Path,
) -> None:
    server = start_server()  # no --dpop: it answers token_type Bearer
    status = await m2m_status(server, tmp_path)
    assert (status.status, status.oauth_status) == ("failed", "authentication_failed")
    assert status.error == (
        "OAuth authentication failed: the authorization server issued a token of type 'Bearer', not DPoP, although"
        " servers.m2m.oauth.dpop is true; the token was not used (RFC 9449 5)"
    )


async def test_a_proof_the_server_refuses_is_named(dpop_server: OAuthServer, tmp_path: Path) -> None:
    with accepting(dpop_server, "EdDSA"):  # it refuses our ES256 proofs
        status = await m2m_status(dpop_server, tmp_path)
    assert (status.status, status.oauth_status) == ("failed", "authentication_failed")
    assert status.error is not None and "invalid_dpop_proof" in status.error, status.error
    assert "alg ES256 is not accepted" in status.error


@pytest.mark.parametrize("grant", ["jwt_bearer", "token_exchange"])
async def test_the_grants_of_a_presented_token_are_proved_too(
    dpop_server: OAuthServer,
    keys: Keys,  # noqa: F811
    tmp_path: Path,
    grant: str,
) -> None:
    server = dpop_server
    before, bound = server.hook("stats"), list(server.hook("dpop-bound"))
    token = tmp_path / "token.jwt"
    token.write_text(idp_token(keys, server, "workload-1"))
    presented = {"assertion_file": str(token)} if grant == "jwt_bearer" else {"subject_token_file": str(token)}
    oauth = OAuthConfig(grant=grant, client_id="workload", issuer=server.base, dpop=True, **presented)  # type: ignore[arg-type]
    config = ServerConfig(url=server.url, oauth=oauth, connect_timeout=5)
    async with UpstreamPool({"wl": config}, token_store=FileTokenStore(tmp_path / "oauth")) as pool:
        assert (await pool.call("wl", "add", {"a": 1, "b": 2})).structured_content == {"result": 3}
    stats = delta(before, server.hook("stats"))
    assert stats[grant] == 1 and stats["dpop_nonce_challenge:token"] == 1 and stats["dpop_bound_request"] >= 1
    record = await FileTokenStore(tmp_path / "oauth").load("wl")
    assert record is not None and record.dpop_key is not None
    assert bound_since(server, bound) == [DPoPKey(record.dpop_key).thumbprint]


async def test_a_proof_the_mcp_server_refuses_fails_the_call_with_its_reason(
    dpop_server: OAuthServer, tmp_path: Path
) -> None:
    server = dpop_server
    oauth = OAuthConfig(client_id="cc-client", client_secret="cc-secret", issuer=server.base, dpop=True)
    config = ServerConfig(url=server.url, oauth=oauth, connect_timeout=5)
    async with UpstreamPool({"m2m": config}, token_store=FileTokenStore(tmp_path / "oauth")) as pool:
        assert (await pool.call("m2m", "add", {"a": 1, "b": 2})).structured_content == {"result": 3}
        with accepting(server, "EdDSA"):  # from now on it refuses our ES256 proofs
            with pytest.raises(UpstreamUnavailable) as caught:
                await pool.call("m2m", "add", {"a": 2, "b": 2})
            status = pool.server_status("m2m")
    assert "the server refused the DPoP proof (invalid_dpop_proof: alg ES256 is not accepted)" in str(caught.value)
    assert status.oauth_status == "authentication_failed", status


async def test_processes_sharing_a_token_store_share_one_key(shared: SharedStore) -> None:
    url = "https://mcp.example/mcp"
    a, b = ServerStorage(shared.a, "fx", url), ServerStorage(shared.b, "fx", url)
    found: list[str] = []

    async def key_of(storage: ServerStorage) -> None:
        found.append(await storage.dpop_key(5.0))

    async with anyio.create_task_group() as tg:  # two processes starting at once
        tg.start_soon(key_of, a)
        tg.start_soon(key_of, b)
    assert found[0] == found[1] == await a.dpop_key(5.0)
    assert "dpop_key" not in repr(await b.record())  # never in a repr (a log record, a traceback)
    await shared.a.forget("fx")  # a logout forgets the key with the tokens: the next login binds to a new one
    assert await a.dpop_key(5.0) != found[0]
