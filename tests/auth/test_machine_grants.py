"""The grants without a browser against the OAuth fixture: client credentials with a `private_key_jwt` client
assertion (RFC 7523 2.2; the key from a file or from the environment), a JWT bearer grant from a token file (RFC 7523
2.1, workload identity; the file is read again at each grant, so a rotated token is used), a token exchange
(RFC 8693), and enterprise-managed authorization (SEP-990: the identity provider's ID-JAG, then the JWT bearer
grant). Both protocol eras, expiry, a key that is missing, wrong or not a key, and no secret in any log."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from onetool.auth import FileTokenStore
from onetool.config import ServerConfig
from onetool.errors import UpstreamUnavailable
from onetool.upstream import UpstreamPool
from onetool.upstream.connection import Mode
from tests.gateways import start_http_gateway, stop, text_of
from tests.upstream.test_oauth import OAuthServer, oauth_server

TTL = 2  # seconds an access token lives: the re-grant after expiry is part of the story


def pem(key: rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def public_pem(key: rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey) -> bytes:
    return key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)


@dataclass(frozen=True)
class Keys:
    client: Path
    """jwt-client's private key (the fixture has its public key)."""
    client_pem: str
    idp: ec.EllipticCurvePrivateKey
    """The identity provider's key: it signs the workload tokens and the tokens to exchange."""


@pytest.fixture(scope="module")
def keys(tmp_path_factory: pytest.TempPathFactory) -> Keys:
    folder = tmp_path_factory.mktemp("keys")
    client, idp = (
        rsa.generate_private_key(public_exponent=65537, key_size=2048),
        ec.generate_private_key(ec.SECP256R1()),
    )
    (folder / "client.pem").write_bytes(pem(client))
    (folder / "client.pub").write_bytes(public_pem(client))
    (folder / "idp.pub").write_bytes(public_pem(idp))
    return Keys(folder / "client.pem", pem(client).decode(), idp)


@pytest.fixture(scope="module")
def server(keys: Keys) -> Iterator[OAuthServer]:
    flags = ("--client-key", str(keys.client.with_suffix(".pub")), "--idp-key", str(keys.client.parent / "idp.pub"))
    with oauth_server(*flags) as started:
        yield started


def idp_token(keys: Keys, server: OAuthServer, subject: str, audience: str | None = None) -> str:
    """What a workload identity provider (or an enterprise IdP) would hand the workload, for this issuer (or, an
    ID token, for ``audience``)."""
    now = int(time.time())
    claims = {
        "iss": "https://idp.example",
        "sub": subject,
        "aud": audience or server.base,
        "iat": now,
        "exp": now + 600,
    }
    return jwt.encode(claims, keys.idp, algorithm="ES256")


def stats(server: OAuthServer) -> dict[str, int]:
    return dict(server.hook("stats"))


def delta(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    return {k: after.get(k, 0) - before.get(k, 0) for k in after if after.get(k, 0) != before.get(k, 0)}


def config(server: OAuthServer, **oauth: Any) -> ServerConfig:
    return ServerConfig(url=server.url, oauth={"issuer": server.base, **oauth}, connect_timeout=5)


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_private_key_jwt_client_credentials_in_both_eras(
    server: OAuthServer, keys: Keys, tmp_path: Path, mode: Mode, log_records: list[dict[str, Any]]
) -> None:
    before = stats(server)
    servers = {"m2m": config(server, client_id="jwt-client", private_key_file=str(keys.client))}
    async with UpstreamPool(servers, token_store=FileTokenStore(tmp_path / "oauth"), mode=mode) as pool:
        assert (await pool.call("m2m", "add", {"a": 1, "b": 2})).structured_content == {"result": 3}
        await anyio.sleep(TTL + 0.5)  # expired, no refresh token: a new grant, with a new assertion
        assert (await pool.call("m2m", "add", {"a": 2, "b": 2})).structured_content == {"result": 4}
        assert (await pool.call("m2m", "audit", {})).structured_content == {"result": "audited"}  # step-up
    assert delta(before, stats(server)) == {"client_credentials": 3, "private_key_jwt": 3, "step_up_challenge": 1}
    logged = repr(log_records)
    assert [s for s in server.hook("secrets") if s in logged] == [] and keys.client_pem[40:80] not in logged


async def test_the_key_can_come_from_the_environment(
    server: OAuthServer, keys: Keys, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("M2M_KEY", keys.client_pem)
    servers = {"m2m": config(server, client_id="jwt-client", private_key_env="M2M_KEY")}
    async with UpstreamPool(servers, token_store=FileTokenStore(tmp_path / "oauth")) as pool:
        assert (await pool.call("m2m", "add", {"a": 1, "b": 2})).structured_content == {"result": 3}


@pytest.mark.parametrize(
    ("key", "reason"),
    [
        ("missing", "servers.m2m.oauth.private_key_file cannot be read (No such file or directory)"),
        ("garbage", "servers.m2m.oauth.private_key_file is not an unencrypted PEM private key"),
        ("other", "Token exchange failed (401)"),  # a key the authorization server does not know: it refuses
    ],
)
async def test_a_key_that_is_missing_not_a_key_or_not_the_clients_fails_clearly(
    server: OAuthServer, tmp_path: Path, key: str, reason: str
) -> None:
    path = tmp_path / "m2m.pem"
    if key == "garbage":
        path.write_text("SECRET-NOT-A-KEY-123")
    elif key == "other":
        path.write_bytes(pem(rsa.generate_private_key(public_exponent=65537, key_size=2048)))
    servers = {"m2m": config(server, client_id="jwt-client", private_key_file=str(path))}
    async with UpstreamPool(servers, token_store=FileTokenStore(tmp_path / "oauth")) as pool:
        status = pool.server_status("m2m")
        with pytest.raises(UpstreamUnavailable) as caught:
            await pool.call("m2m", "add", {"a": 1, "b": 2})
    assert (status.status, status.oauth_status) == ("failed", "authentication_failed")
    assert status.error is not None and reason in status.error, status.error
    assert status.fix == "check servers.m2m.oauth"
    # the path is for operators (the CLI, the log); what a snippet reads names the config key only
    assert status.detail == (str(path) if key != "other" else None)
    assert str(tmp_path) not in status.error + str(caught.value)
    assert "SECRET" not in status.report + str(caught.value)


async def test_jwt_bearer_reads_the_token_file_at_each_grant(server: OAuthServer, keys: Keys, tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    first = idp_token(keys, server, "workload-1")
    token_file.write_text(first + "\n")  # as a projected service-account token: one line
    servers = {"wl": config(server, grant="jwt_bearer", client_id="workload", assertion_file=str(token_file))}
    before = stats(server)
    async with UpstreamPool(servers, token_store=FileTokenStore(tmp_path / "oauth")) as pool:
        assert (await pool.call("wl", "add", {"a": 1, "b": 2})).structured_content == {"result": 3}
        rotated = idp_token(keys, server, "workload-2")
        token_file.write_text(rotated)
        await anyio.sleep(TTL + 0.5)
        assert (await pool.call("wl", "add", {"a": 2, "b": 2})).structured_content == {"result": 4}
    assert delta(before, stats(server)) == {"jwt_bearer": 2}
    assert {first, rotated} <= set(server.hook("secrets"))  # the rotated token was presented


async def test_a_token_that_does_not_verify_is_refused_with_the_servers_words(
    server: OAuthServer, keys: Keys, tmp_path: Path
) -> None:
    token_file = tmp_path / "token"
    token_file.write_text(jwt.encode({"sub": "x", "aud": server.base, "exp": int(time.time()) + 60}, "k" * 32))
    servers = {"wl": config(server, grant="jwt_bearer", client_id="workload", assertion_file=str(token_file))}
    async with UpstreamPool(servers, token_store=FileTokenStore(tmp_path / "oauth")) as pool:
        status = pool.server_status("wl")
    assert (status.status, status.oauth_status) == ("failed", "authentication_failed")
    assert status.error is not None and "invalid_grant" in status.error and "the JWT does not verify" in status.error


async def test_token_exchange_through_the_gateway(server: OAuthServer, keys: Keys, tmp_path: Path) -> None:
    subject = tmp_path / "subject.jwt"
    subject.write_text(idp_token(keys, server, "alice@example.com"))
    oauth = {
        "grant": "token_exchange",
        "client_id": "cc-client",
        "client_secret": "cc-secret",
        "subject_token_file": "subject.jwt",  # relative to the config file
        "audience": "mcp-fixture",
        "issuer": server.base,
    }
    before = stats(server)
    served = start_http_gateway(
        tmp_path, {"servers": {"tx": {"url": server.url, "oauth": oauth, "connect_timeout": 5}}}, uuid.uuid4().hex
    )
    try:
        assert text_of(await served.run("tx.add(a=20, b=22)")) == "42"
    finally:
        stop(served.proc)
    assert delta(before, stats(server)) == {"token_exchange": 1, "audience:mcp-fixture": 1}
    log = served.log.read_text()
    assert [s for s in server.hook("secrets") if s in log] == []


async def test_cross_app_access_exchanges_the_id_token_for_an_id_jag_then_presents_it(
    server: OAuthServer, keys: Keys, tmp_path: Path, log_records: list[dict[str, Any]]
) -> None:
    (tmp_path / "id_token").write_text(idp_token(keys, server, "alice@example.com", audience="idp-client"))
    idp = {"token_endpoint": f"{server.base}/idp/token", "client_id": "idp-client", "id_token_file": "id_token"}
    oauth = {"grant": "jwt_bearer", "client_id": "cc-client", "client_secret": "cc-secret", "identity_provider": idp}
    servers = {
        "xaa": config(server, **oauth).model_copy(update={"oauth": config(server, **oauth).oauth.relative_to(tmp_path)})
    }  # type: ignore[union-attr]
    before = stats(server)
    async with UpstreamPool(servers, token_store=FileTokenStore(tmp_path / "oauth")) as pool:
        assert (await pool.call("xaa", "add", {"a": 1, "b": 2})).structured_content == {"result": 3}
    assert delta(before, stats(server)) == {"idp_token_exchange": 1, "id_jag": 1, "jwt_bearer": 1}
    logged = repr(log_records)
    assert [s for s in server.hook("secrets") if s in logged] == []


async def test_an_id_token_the_identity_provider_refuses_is_named_with_its_words(
    server: OAuthServer, keys: Keys, tmp_path: Path
) -> None:
    (tmp_path / "id_token").write_text(idp_token(keys, server, "mallory", audience="another-client"))
    idp = {"token_endpoint": f"{server.base}/idp/token", "id_token_file": str(tmp_path / "id_token")}
    oauth = {"grant": "jwt_bearer", "client_id": "cc-client", "client_secret": "cc-secret", "identity_provider": idp}
    async with UpstreamPool({"xaa": config(server, **oauth)}, token_store=FileTokenStore(tmp_path / "oauth")) as pool:
        status = pool.server_status("xaa")
    assert (status.status, status.oauth_status) == ("failed", "authentication_failed")
    assert status.error == (
        "OAuth authentication failed: the identity provider refused the token exchange: invalid_grant: the JWT does"
        " not verify: InvalidAudienceError"
    )
