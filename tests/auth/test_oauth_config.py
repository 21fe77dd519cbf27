"""The `oauth:` block: each grant and client authentication, and the error a half-filled block gets (the key that is
missing or unused, and the flow that needs it or does not)."""

from __future__ import annotations

from pathlib import Path

import pytest

from onetool.config import load_config
from tests.config.test_config import error_of, write


@pytest.mark.parametrize(
    ("oauth", "message"),
    [
        ("{grant: client_credentials}", "grant client_credentials needs client_id"),
        (
            "{grant: client_credentials, client_id: c}",
            "grant client_credentials needs a client credential: client_secret, or private_key_file or"
            " private_key_env (client_auth private_key_jwt)",
        ),
        ("{grant: jwt_bearer, client_id: c}", "grant jwt_bearer needs assertion_file (the file holding the JWT"),
        (
            "{grant: jwt_bearer, client_id: c, assertion_file: a, identity_provider: {token_endpoint: "
            "'https://idp.example/token', id_token_file: t}}",
            "or identity_provider (which issues it), one of them",
        ),
        (
            "{grant: jwt_bearer, client_id: c, identity_provider: {token_endpoint: 'http://idp.example/token',"
            " id_token_file: t}}",
            "token_endpoint: plain http:// to idp.example sends the ID token unencrypted: use https://",
        ),
        (
            "{identity_provider: {token_endpoint: 'https://idp.example/token', id_token_file: t}}",
            "identity_provider is only used by grant jwt_bearer",
        ),
        ("{grant: jwt_bearer, assertion_file: t.jwt}", "grant jwt_bearer needs client_id"),
        ("{grant: token_exchange, client_id: c}", "grant token_exchange needs subject_token_file"),
        ("{client_auth: private_key_jwt, client_id: c}", "client_auth private_key_jwt needs private_key_file or"),
        ("{client_auth: private_key_jwt, private_key_env: K}", "client_auth private_key_jwt needs client_id"),
        ("{client_auth: client_secret_basic, client_id: c}", "client_auth client_secret_basic needs client_secret"),
        ("{client_auth: none, client_id: c, client_secret: s3cr3t}", "client_auth none sends no client_secret"),
        ("{client_id: c, client_secret: s3cr3t, private_key_env: K}", "give client_secret (client_auth"),
        ("{client_id: c, private_key_file: k.pem, private_key_env: K}", "give private_key_file or private_key_env"),
        (
            "{client_id: c, client_auth: client_secret_post, client_secret: s3cr3t, private_key_file: k.pem}",
            "a private key is only used by client_auth private_key_jwt, and client_auth is client_secret_post",
        ),
        (
            "{grant: authorization_code, client_id: c, private_key_env: K}",
            "client_auth private_key_jwt is for the grants without a browser",
        ),
        (
            "{grant: client_credentials, client_id: c, client_secret: s3cr3t, signing_algorithm: ES256}",
            "signing_algorithm is only used by client_auth private_key_jwt, and client_auth is client_secret_basic",
        ),
        ("{assertion_file: t.jwt}", "assertion_file is only used by grant jwt_bearer; set grant: jwt_bearer"),
        ("{audience: x}", "audience is only used by grant token_exchange"),
        (
            "{grant: client_credentials, client_id: c, client_secret: s3cr3t, redirect_uri: 'http://127.0.0.1:1/cb'}",
            "redirect_uri is only used by grant authorization_code, and grant is client_credentials",
        ),
        ("{grant: device_code}", "oauth.grant: Input should be 'authorization_code', 'client_credentials'"),
        ("{flow: client_credentials}", "oauth.flow: unknown key"),
    ],
)
def test_a_half_filled_oauth_block_names_the_missing_key_and_the_flow(tmp_path: Path, oauth: str, message: str) -> None:
    error = error_of(write(tmp_path, f"servers:\n  s: {{url: 'http://127.0.0.1:9/mcp', oauth: {oauth}}}\n"))
    assert "servers.s.oauth" in error and message in error, error
    assert "s3cr3t" not in error


def test_every_problem_of_a_block_is_named_at_once(tmp_path: Path) -> None:
    error = error_of(write(tmp_path, "servers:\n  s: {url: 'http://127.0.0.1:9/mcp', oauth: {grant: jwt_bearer}}\n"))
    assert "grant jwt_bearer needs client_id" in error and "grant jwt_bearer needs assertion_file" in error


def test_client_auth_follows_the_credentials_and_files_are_relative_to_the_config(tmp_path: Path) -> None:
    blocks = {
        "code": "{}",
        "code_secret": "{client_id: c, client_secret: s}",
        "cc": "{grant: client_credentials, client_id: c, client_secret: s}",
        "key": "{client_id: c, private_key_file: keys/k.pem}",
        "wl": "{grant: jwt_bearer, client_id: c, assertion_file: /run/token}",
        "tx": "{grant: token_exchange, client_id: c, client_secret: s, subject_token_file: t, audience: a}",
        "xaa": "{grant: jwt_bearer, client_id: c, client_secret: s, identity_provider: {token_endpoint:"
        " 'https://idp.example/token', id_token_file: idp/id_token}}",
    }
    text = "servers:\n" + "".join(f"  {n}: {{url: 'http://127.0.0.1:9/mcp', oauth: {b}}}\n" for n, b in blocks.items())
    config = load_config(write(tmp_path, text), environ={})
    oauth = {name: s.oauth for name, s in config.servers.items() if s.oauth is not None}
    assert {name: o.token_auth for name, o in oauth.items()} == {
        "code": "none",
        "code_secret": "client_secret_post",
        "cc": "client_secret_basic",
        "key": "private_key_jwt",
        "wl": "none",
        "tx": "client_secret_basic",
        "xaa": "client_secret_basic",
    }
    assert oauth["key"].private_key_file == tmp_path / "keys" / "k.pem"
    assert oauth["wl"].assertion_file == Path("/run/token")
    assert oauth["tx"].subject_token_file == tmp_path / "t"
    assert oauth["xaa"].identity_provider is not None
    assert oauth["xaa"].identity_provider.id_token_file == tmp_path / "idp" / "id_token"
    assert "'s'" not in repr(oauth["cc"])  # the secret stays out of reprs (and so out of logged models)
