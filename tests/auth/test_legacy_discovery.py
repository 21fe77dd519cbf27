"""A 2025-03-26 server: no protected-resource metadata (RFC 9728), its authorization server's metadata (RFC 8414) at
the MCP server's own origin. The SDK falls back to it after the protected-resource well-knowns answer 404: both the
browser flow and a machine grant authorize, through the pool and through `onetool serve`."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from onetool.auth import FileTokenStore
from onetool.upstream import UpstreamPool
from tests.gateways import start_http_gateway, stop, text_of
from tests.upstream.test_oauth import Browser, OAuthServer, cc_config, code_config, oauth_server, run_authorization


@pytest.fixture(scope="module")
def server() -> Iterator[OAuthServer]:
    with oauth_server("--ttl", "600", "--no-resource-metadata") as started:
        yield started


def discovery(records: list[dict[str, Any]], server: OAuthServer) -> list[str]:
    """The well-known paths the OAuth flow asked, in order."""
    found = [r["extra"]["endpoint"] for r in records if "OAuth discovery at" in r["message"]]
    return [url.removeprefix(server.base) for url in found]


async def test_the_browser_flow_finds_the_metadata_at_the_servers_origin(
    server: OAuthServer, tmp_path: Path, log_records: list[dict[str, Any]]
) -> None:
    assert server.hook("stats") == {}
    store = FileTokenStore(tmp_path / "oauth")
    done = await run_authorization("old", code_config(server), store, Browser())
    assert done.tool_count == 3
    assert discovery(log_records, server) == [
        "/.well-known/oauth-protected-resource/mcp",
        "/.well-known/oauth-protected-resource",
        "/.well-known/oauth-authorization-server",
    ]
    assert server.hook("stats") == {"registration": 1, "authorization_code": 1}
    async with UpstreamPool({"old": code_config(server)}, token_store=store) as pool:
        assert (await pool.call("old", "add", {"a": 1, "b": 2})).structured_content == {"result": 3}


async def test_client_credentials_through_the_gateway(server: OAuthServer, tmp_path: Path) -> None:
    m2m = cc_config(server).oauth
    assert m2m is not None
    oauth = m2m.model_dump(include={"client_id", "client_secret", "issuer"})
    config = {"servers": {"m2m": {"url": server.url, "oauth": oauth, "connect_timeout": 5}}}
    served = start_http_gateway(tmp_path, config, f"gw-{uuid.uuid4().hex}")
    try:
        assert text_of(await served.run("m2m.add(a=2, b=3)")) == "5"
    finally:
        stop(served.proc)
    log = served.log.read_text()
    assert f"OAuth discovery at {server.base}/.well-known/oauth-authorization-server" in log
    assert [s for s in server.hook("secrets") if s in log] == []
