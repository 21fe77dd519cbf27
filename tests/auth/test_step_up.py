"""Scope step-up: the OAuth fixture answers a call of its `audit` tool with 403 `insufficient_scope` naming
`scope="mcp audit"` unless the token has `audit`. A grant without a browser asks for a token with the union of the
scopes and retries; the authorization-code flow fails the call with what to run, keeps the session, and the next
`onetool auth NAME` asks for the union. In both protocol eras, through the pool and through `onetool serve`."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from onetool.auth import FileTokenStore
from onetool.errors import UpstreamError
from onetool.upstream import UpstreamPool
from onetool.upstream.connection import Mode
from tests.gateways import auth_command, start_http_gateway, stop, text_of
from tests.upstream.test_oauth import (
    Browser,
    OAuthServer,
    cc_config,
    code_config,
    fetch,
    oauth_server,
    run_authorization,
)

MODES: list[Mode] = ["auto", "legacy"]  # 2026-07-28 and 2025-11-25 against the fixture (mcp 2.3)


@pytest.fixture(scope="module")
def server() -> Iterator[OAuthServer]:
    with oauth_server("--ttl", "600") as started:  # no expiry: refresh is not what these tests are about
        yield started


def stats(server: OAuthServer) -> dict[str, int]:
    return dict(server.hook("stats"))


def delta(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    return {k: after.get(k, 0) - before.get(k, 0) for k in after if after.get(k, 0) != before.get(k, 0)}


@pytest.mark.parametrize("mode", MODES)
async def test_client_credentials_obtains_the_union_of_the_scopes_and_retries(
    server: OAuthServer, tmp_path: Path, mode: Mode
) -> None:
    store = FileTokenStore(tmp_path / "oauth")
    before = stats(server)
    async with UpstreamPool({"m2m": cc_config(server, scopes=["mcp"])}, token_store=store, mode=mode) as pool:
        assert (await pool.call("m2m", "add", {"a": 1, "b": 2})).structured_content == {"result": 3}
        assert (await pool.call("m2m", "audit", {})).structured_content == {"result": "audited"}
        assert (await pool.call("m2m", "audit", {})).structured_content == {"result": "audited"}  # no new grant
        assert pool.server_status("m2m").protocol_version == ("2025-11-25" if mode == "legacy" else "2026-07-28")
    assert delta(before, stats(server)) == {"client_credentials": 2, "step_up_challenge": 1}
    record = await store.load("m2m")
    assert record is not None and record.tokens is not None and record.tokens.scope == "mcp audit"


@pytest.mark.parametrize("mode", MODES)
async def test_authorization_code_names_the_scope_then_onetool_auth_asks_for_the_union(
    server: OAuthServer, tmp_path: Path, mode: Mode, log_records: list[dict[str, Any]]
) -> None:
    store = FileTokenStore(tmp_path / "oauth")
    config = code_config(server, scopes=["mcp"])
    first = Browser()
    await run_authorization("fx", config, store, first)
    assert parse_qs(urlsplit(first.urls[0]).query)["scope"] == ["mcp"]
    async with UpstreamPool({"fx": config}, token_store=store, mode=mode) as pool:
        with pytest.raises(UpstreamError) as refused:
            await pool.call("fx", "audit", {})
        assert str(refused.value) == (
            "fx.audit failed: authorization required: the server asks for scope 'mcp audit'; run `onetool auth fx`"
        )
        # the session stays: other calls go on with the token as it is
        assert (await pool.call("fx", "add", {"a": 2, "b": 3})).structured_content == {"result": 5}
        status = pool.server_status("fx")
        assert (status.status, status.oauth_status) == ("connected", "authenticated")
    record = await store.load("fx")
    assert record is not None and record.wanted_scope == "mcp audit"
    warned = [r["level"] for r in log_records if "needs scope 'mcp audit'" in r["message"]]
    assert warned == ["WARNING"]

    again = Browser()
    await run_authorization("fx", config, store, again)
    assert parse_qs(urlsplit(again.urls[0]).query)["scope"] == ["mcp audit"]
    record = await store.load("fx")
    assert record is not None and record.tokens is not None and record.tokens.scope == "mcp audit"
    assert record.wanted_scope is None
    async with UpstreamPool({"fx": config}, token_store=store, mode=mode) as pool:
        assert (await pool.call("fx", "audit", {})).structured_content == {"result": "audited"}


async def test_step_up_through_the_gateway_for_both_kinds_of_flow(server: OAuthServer, tmp_path: Path) -> None:
    m2m = {"client_id": "cc-client", "client_secret": "cc-secret", "issuer": server.base}
    config = {
        "servers": {
            "fx": {"url": server.url, "oauth": {}, "connect_timeout": 5},
            "m2m": {"url": server.url, "oauth": m2m, "connect_timeout": 5},
        }
    }
    served = start_http_gateway(tmp_path, config, f"gw-{uuid.uuid4().hex}")
    try:
        env = {**os.environ, "LOG_LEVEL": "WARNING"}
        with auth_command(tmp_path / "onetool.yaml", "fx", env) as (url, proc):
            fetch(url)
            _, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
        catch = (
            "try:\n    fx.audit()\nexcept Exception as e:\n    caught = str(e)\n[caught, fx.add(a=1, b=1), m2m.audit()]"
        )
        shown = text_of(await served.run(catch))
        assert "fx.audit failed: authorization required: the server asks for scope 'mcp audit'" in shown, shown
        assert "run `onetool auth fx`" in shown and '"audited"' in shown and "2" in shown

        with auth_command(tmp_path / "onetool.yaml", "fx", env) as (url, proc):
            assert parse_qs(urlsplit(url).query)["scope"] == ["mcp audit"]  # nothing asked before: the 403's scope
            fetch(url)
            _, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
        assert text_of(await served.run("fx.audit()")) == "audited"
    finally:
        stop(served.proc)
    log = served.log.read_text()
    assert [s for s in server.hook("secrets") if s in log] == []
