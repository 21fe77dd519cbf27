"""`onetool auth NAME` against a running `onetool serve --http`: the gateway runs the flow, the browser comes back
to its GET /oauth/callback, the server works at once, and the tokens live in the state store across a restart.
The "browser" follows the printed URL with urllib."""

from __future__ import annotations

import os
import subprocess
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import anyio
import httpx2
import pytest

from onetool.logs import RECORD_HEAD
from tests.fixtures.oauth_server import EXCHANGE_REFUSED
from tests.gateways import ONETOOL, ServedGateway, auth_command, start_http_gateway, stop, text_of
from tests.upstream.test_oauth import OAuthServer, fetch, start_server  # noqa: F401 (fixture)


def origin(served: ServedGateway) -> str:
    return served.url.removesuffix("/mcp")


def status_of(served: ServedGateway) -> dict[str, Any]:
    return httpx2.get(f"{origin(served)}/status").json()


def oauth_view(served: ServedGateway, name: str) -> tuple[str, str | None]:
    view = next(s for s in status_of(served)["servers"] if s["name"] == name)
    return view["status"], view["oauth_status"]


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[Callable[[dict[str, Any]], ServedGateway]]:
    started: list[ServedGateway] = []

    def start(config: dict[str, Any]) -> ServedGateway:
        marker = f"gw-{uuid.uuid4().hex}"
        started.append(start_http_gateway(tmp_path, config, marker))
        return started[-1]

    yield start
    for served in started:
        stop(served.proc)


async def test_auth_through_the_running_gateway_then_a_restart_keeps_the_tokens(
    start_server: Callable[..., OAuthServer],  # noqa: F811
    serve: Callable[[dict[str, Any]], ServedGateway],
    tmp_path: Path,
) -> None:
    server = start_server()
    config = {"servers": {"fx": {"url": server.url, "oauth": {}, "connect_timeout": 5}}}
    served = serve(config)
    assert oauth_view(served, "fx") == ("failed", "pending_authorization")

    with auth_command(tmp_path / "onetool.yaml", "fx", {**os.environ, "LOG_LEVEL": "WARNING"}) as (url, proc):
        query = parse_qs(urlsplit(url).query)
        redirect_uri, state = query["redirect_uri"][0], query["state"][0]
        assert redirect_uri == f"{origin(served)}/oauth/callback"
        forged = fetch(f"{redirect_uri}?state=forged-{state}&code=stolen")
        assert forged.status_code == 400 and "invalid or has expired" in forged.text

        page = fetch(url)  # the browser step: the authorization server approves and redirects to the gateway
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert page.status_code == 200 and "Authorization complete" in page.text and "<b>fx</b>" in page.text
    assert f"server 'fx': authorized; 3 tools (reconnected by the gateway at {origin(served)})" in out

    # Connected without a restart: the gateway reconnected the server with the stored tokens.
    assert oauth_view(served, "fx") == ("connected", "authenticated")
    assert text_of(await served.run("fx.add(a=1, b=2)")) == "3"
    replay = fetch(f"{redirect_uri}?state={state}&code=again")  # a state completes one flow, once
    assert replay.status_code == 400 and "invalid or has expired" in replay.text

    secrets = {*server.hook("secrets"), state}
    assert len(secrets) >= 5
    status_body = httpx2.get(f"{origin(served)}/status").text
    log = served.log.read_text()
    assert "/oauth/callback?" not in log  # request lines name the path only, never the query (code, state)
    assert [s for s in secrets if s in log or s in status_body] == []

    stop(served.proc)
    restarted = serve(config)
    assert oauth_view(restarted, "fx") == ("connected", "authenticated")  # the tokens came from the state store
    assert text_of(await restarted.run("fx.add(a=2, b=2)")) == "4"
    assert server.hook("stats")["authorization_code"] == 1


async def test_a_token_exchange_refused_after_a_valid_code_gives_an_error_page_from_the_gateway(
    start_server: Callable[..., OAuthServer],  # noqa: F811
    serve: Callable[[dict[str, Any]], ServedGateway],
    tmp_path: Path,
) -> None:
    server = start_server("--fail-exchange")
    served = serve({"servers": {"fx": {"url": server.url, "oauth": {}, "connect_timeout": 5}}})
    with auth_command(tmp_path / "onetool.yaml", "fx", {**os.environ, "LOG_LEVEL": "WARNING"}) as (url, proc):
        assert parse_qs(urlsplit(url).query)["redirect_uri"] == [f"{origin(served)}/oauth/callback"]
        page = fetch(url)  # approved, redirected to the gateway with a valid code; the exchange is refused
        out, err = proc.communicate(timeout=60)
    assert page.status_code == 400 and "Authorization failed" in page.text
    assert "OneTool could not be authorized for server <b>fx</b>: Token exchange failed (400)" in page.text
    assert "invalid_grant" in page.text and EXCHANGE_REFUSED in page.text
    assert proc.returncode != 0 and "Token exchange failed (400)" in err, (out, err)
    assert server.hook("stats") == {"registration": 1, "refused_exchange": 1}
    assert oauth_view(served, "fx") == ("failed", "pending_authorization")  # nothing was stored
    log = served.log.read_text()
    failed = [line for line in log.splitlines() if "OAuth authorization failed: Token exchange failed (400)" in line]
    assert [m["level"] for line in failed if (m := RECORD_HEAD.match(line))] == ["ERROR"]
    assert "; run `onetool auth fx` again" in failed[0]
    assert [s for s in server.hook("secrets") if s in log] == []


def test_auth_of_a_server_the_gateway_does_not_have_names_the_problem(
    serve: Callable[[dict[str, Any]], ServedGateway], tmp_path: Path
) -> None:
    serve({"servers": {"plain": {"command": "true", "connect_timeout": 2}}})
    env = {**os.environ, "LOG_LEVEL": "WARNING"}
    for name, message in (
        ("nope", "unknown server 'nope'"),
        ("plain", "server 'plain' has no oauth block in its config: there is nothing to authorize"),
    ):
        done = subprocess.run(
            [ONETOOL, "auth", name, "--config", str(tmp_path / "onetool.yaml")],
            env=env,
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert done.returncode != 0 and message in done.stderr, done.stderr


async def test_tokens_in_a_response_the_client_cannot_read_reach_neither_snippet_status_nor_log(
    start_server: Callable[..., OAuthServer],  # noqa: F811
    serve: Callable[[dict[str, Any]], ServedGateway],
) -> None:
    """The SDK's error for a token response it cannot read quotes the response, tokens included. What a snippet
    (the server's listing, a call to it), /status and the log show of that error is its first line only."""
    server = start_server("--malformed-tokens")
    m2m = {"client_id": "cc-client", "client_secret": "cc-secret", "issuer": server.base}
    served = serve({"servers": {"m2m": {"url": server.url, "oauth": m2m, "connect_timeout": 5}}})
    with anyio.fail_after(20):
        while oauth_view(served, "m2m") != ("failed", "authentication_failed"):
            await anyio.sleep(0.1)
    code = (
        "try:\n    m2m.add(a=1, b=2)\n    called = 'answered'\nexcept Exception as e:\n    called = str(e)\n"
        "[called, [s['error'] for s in proxy.list_servers() if s['name'] == 'm2m']]"
    )
    shown = text_of(await served.run(code))
    assert "OAuth authentication failed: Invalid token response" in shown, shown
    assert server.hook("stats")["client_credentials"] >= 1  # tokens were issued, and sent in the bad response
    # pydantic shortens the value it quotes ('y4PLx36v...earer'): not even a token's head may show
    heads = {secret[:8] for secret in server.hook("secrets")}
    status_body = httpx2.get(f"{origin(served)}/status").text
    log = served.log.read_text()
    assert [h for h in heads if h in shown or h in status_body or h in log] == []
    assert "input_value" not in shown + status_body + log
