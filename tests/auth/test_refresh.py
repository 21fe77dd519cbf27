"""The token refresh across replicas: two pools with one token store between them (tests/auth/conftest.py), against
the fixture authorization server, whose refresh tokens are single-use and whose refresh grants take REFRESH_DELAY
(so two refreshes at once overlap there). One refresh at a time reaches it; the others use what it stored; a refused
refresh token is told apart from one another replica spent first, and named."""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp.shared.auth import OAuthToken

from onetool.auth import FileTokenStore, ServerStorage, StoredAuth, TokenStore, build_provider
from onetool.auth import provider as oauth_provider
from onetool.errors import UpstreamUnavailable
from onetool.state.paths import write_private
from onetool.upstream import UpstreamPool
from tests.auth.conftest import STORE_TIMEOUT, SharedStore
from tests.upstream.test_oauth import Browser, OAuthServer, code_config, oauth_server, pool_of, run_authorization

REFRESH_DELAY = 0.5
CALLS = 3  # per replica, at once


@pytest.fixture(scope="module")
def server() -> Iterator[OAuthServer]:
    with oauth_server("--refresh-delay", str(REFRESH_DELAY)) as started:
        yield started


class Grants:
    """The server's refresh grants from now on: issued, and refused."""

    def __init__(self, server: OAuthServer) -> None:
        self.server = server
        self.before = Counter(server.hook("stats"))

    def since(self) -> dict[str, int]:
        now = Counter(self.server.hook("stats"))
        return {k: now[k] - self.before[k] for k in ("refresh_token", "refused_refresh") if now[k] != self.before[k]}


async def authorized(server: OAuthServer, store: TokenStore) -> StoredAuth:
    """Tokens for `fx` in the store, as `onetool auth fx` leaves them."""
    await run_authorization("fx", code_config(server), store, Browser())
    record = await store.load("fx")
    assert record is not None and record.tokens is not None and record.expires_at is not None
    return record


async def until_expired(record: StoredAuth) -> None:
    assert record.expires_at is not None
    await anyio.sleep(max(0.0, record.expires_at - time.time()) + 0.2)


async def calls_at_once(pools: list[UpstreamPool]) -> list[Any]:
    """CALLS calls on each pool at once; each call's structured result, or the error it raised."""
    results: list[Any] = []

    async def call(pool: UpstreamPool) -> None:
        try:
            results.append((await pool.call("fx", "add", {"a": 1, "b": 2})).structured_content)
        except UpstreamUnavailable as e:
            results.append(e)

    with anyio.fail_after(30):
        async with anyio.create_task_group() as tg:
            for pool in pools:
                for _ in range(CALLS):
                    tg.start_soon(call, pool)
    return results


async def test_replicas_refreshing_at_once_send_one_refresh_and_all_use_its_tokens(
    server: OAuthServer, shared: SharedStore, log_records: list[dict[str, Any]]
) -> None:
    first = await authorized(server, shared.a)
    async with pool_of({"fx": code_config(server)}, shared.a) as a, pool_of({"fx": code_config(server)}, shared.b) as b:
        assert a.server_status("fx").connected and b.server_status("fx").connected
        await until_expired(first)  # both hold the same expired access token
        grants, used = Grants(server), len(server.hook("access-tokens"))
        assert await calls_at_once([a, b]) == [{"result": 3}] * 2 * CALLS
        assert grants.since() == {"refresh_token": 1}  # not one per replica, and none refused
        assert (a.server_status("fx").oauth_status, b.server_status("fx").oauth_status) == ("authenticated",) * 2
    stored = await shared.b.load("fx")
    assert stored is not None and stored.tokens is not None and stored.tokens.access_token != first.tokens.access_token
    assert set(server.hook("access-tokens")[used:]) == {stored.tokens.access_token}  # every call, both replicas
    assert [r for r in log_records if r["level"] in ("WARNING", "ERROR")] == []
    adopted = [r for r in log_records if "using the OAuth tokens another process stored" in r["message"]]
    assert [r["level"] for r in adopted] == ["DEBUG"]  # the replica that waited


async def test_a_refused_refresh_token_ends_the_login_on_every_replica_with_its_cause_and_no_secret(
    server: OAuthServer, shared: SharedStore, log_records: list[dict[str, Any]]
) -> None:
    first = await authorized(server, shared.a)
    async with pool_of({"fx": code_config(server)}, shared.a) as a, pool_of({"fx": code_config(server)}, shared.b) as b:
        server.hook("revoke", "POST")  # the authorization server forgets the refresh token
        await until_expired(first)
        grants = Grants(server)
        results = await calls_at_once([a, b])
        statuses = [a.server_status("fx"), b.server_status("fx")]
    assert grants.since() == {"refused_refresh": 1}  # one replica found it refused; the other read why

    cause = "invalid_grant: refresh token does not exist"  # the fixture's error and error_description
    reason = f"authorization required: the authorization server refused the stored refresh token ({cause})"
    assert {str(e) for e in results} == {f"server 'fx' is unavailable: {reason}; run `onetool auth fx`"}
    assert [(s.oauth_status, s.error, s.fix) for s in statuses] == [
        ("pending_authorization", reason, "run `onetool auth fx`")
    ] * 2
    errors = [r["message"] for r in log_records if r["level"] == "ERROR"]
    assert errors == [f"server 'fx': {reason}; run `onetool auth fx`"] * 2  # once per replica
    stored = await shared.b.load("fx")
    assert stored is not None and stored.tokens is None and stored.refused == cause and stored.client is not None

    secrets = set(server.hook("secrets"))
    shown = [str(e) for e in results] + [r["message"] + " " + repr(r["extra"]) for r in log_records]
    assert [s for s in secrets for line in shown if s in line] == []


async def test_a_refresh_refused_because_a_lockless_replica_spent_the_token_uses_what_it_stored(
    server: OAuthServer, tmp_path: Path, log_records: list[dict[str, Any]]
) -> None:
    """A replica that refreshes without holding the record (an older OneTool, which wrote the token file with no
    lock) spends the refresh token while this one's refresh of it is on its way: refused, this one reads the store
    again, finds that replica's tokens, and uses them; it does not end the login."""
    store = FileTokenStore(tmp_path / "oauth", wait=STORE_TIMEOUT)
    first = await authorized(server, store)
    assert first.tokens is not None and first.client is not None
    spend = {
        "grant_type": "refresh_token",
        "refresh_token": first.tokens.refresh_token,
        "client_id": first.client.client_id,
    }
    results: list[Any] = []

    async def call(pool: UpstreamPool) -> None:
        results.append((await pool.call("fx", "add", {"a": 1, "b": 2})).structured_content)

    async with pool_of({"fx": code_config(server)}, store) as pool, httpx2.AsyncClient() as http:
        await until_expired(first)
        grants = Grants(server)
        server.hook("pause-refresh", "POST")
        async with anyio.create_task_group() as tg:
            tg.start_soon(call, pool)
            with anyio.fail_after(10):
                while not server.hook("stats").get("paused_refresh"):  # this replica's refresh is on its way
                    await anyio.sleep(0.02)
            answer = await http.post(f"{server.base}/token", data=spend)
            assert answer.status_code == 200
            theirs = OAuthToken.model_validate(answer.json())
            # written as that OneTool wrote it: straight into the file, past the lock this one holds
            lockless = first.model_copy(update={"tokens": theirs, "expires_at": time.time() + (theirs.expires_in or 0)})
            write_private(store.folder / "fx.json", lockless.model_dump_json(exclude_none=True))
            server.hook("resume-refresh", "POST")
        assert results == [{"result": 3}]
        assert pool.server_status("fx").oauth_status == "authenticated"
    assert grants.since() == {"refresh_token": 1, "refused_refresh": 1}  # theirs, then this one's
    stored = await store.load("fx")
    assert stored is not None and stored.tokens == theirs  # kept, not dropped as a dead login
    assert server.hook("access-tokens")[-1] == theirs.access_token
    refused = [r for r in log_records if "another process had refreshed, using its tokens" in r["message"]]
    assert [r["level"] for r in refused] == ["DEBUG"]
    assert [r for r in log_records if r["level"] in ("WARNING", "ERROR")] == []


async def test_a_replica_stuck_mid_refresh_delays_the_others_for_a_bounded_time(
    server: OAuthServer, shared: SharedStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another replica holds the record past HOLD_WAIT (hung mid-refresh): the call fails for now, saying so, and the
    stored login stands; once the record is free the next call refreshes and works."""
    monkeypatch.setattr(oauth_provider, "HOLD_WAIT", 0.5)
    first = await authorized(server, shared.a)
    async with pool_of({"fx": code_config(server)}, shared.b) as pool:
        await until_expired(first)
        async with shared.a.hold("fx", 10):
            started = time.monotonic()
            with pytest.raises(UpstreamUnavailable) as caught:
                await pool.call("fx", "add", {"a": 1, "b": 2})
            assert time.monotonic() - started < 10
            reason = "OAuth token refresh failed: the token store could not be read or held"
            assert f"server 'fx' is unavailable: connection lost: {reason}" in str(caught.value)
            assert "retry later" in str(caught.value) and "onetool auth" not in str(caught.value)
            status = pool.server_status("fx")
            assert status.oauth_status == "authenticated" and status.fix is None  # nothing for anyone to do
            assert status.detail is not None and "OAuth record of 'fx'" in status.detail  # the store's own words
            assert shared.where.split("://")[-1].split("/")[-1] not in (status.error or "")  # no host path or URL
        assert await shared.b.load("fx") == first  # untouched
        with anyio.fail_after(15):
            while not pool.server_status("fx").connected:
                await anyio.sleep(0.05)
        assert (await pool.call("fx", "add", {"a": 1, "b": 2})).structured_content == {"result": 3}


@pytest.mark.parametrize(
    ("status", "body", "cause"),
    [
        (
            400,
            {"error": "invalid_grant", "error_description": "refresh token expired"},
            "invalid_grant: refresh token expired",
        ),
        (
            400,
            {"error": "invalid_grant", "error_description": "token R-SECRET-1 was revoked"},
            "invalid_grant: token *** was revoked",
        ),
        (400, {"error": "invalid_grant", "error_description": 'bad "quote"\nand newline'}, "invalid_grant"),
        (400, {"error": "invalid_grant", "error_description": "x" * 201}, "invalid_grant"),
        (401, {"error": "A-SECRET-0"}, "***"),
        (400, {"error": "\u202eevil"}, "HTTP 400"),
        (503, "<html>busy</html>", "HTTP 503"),
        (200, {"accessToken": "A-SECRET-0"}, "HTTP 200 with no token response in it"),
    ],
)
def test_the_cause_of_a_refusal_is_the_servers_own_words_without_our_secrets(
    status: int, body: Any, cause: str
) -> None:
    content = json.dumps(body).encode() if not isinstance(body, str) else body.encode()
    response = httpx2.Response(status, content=content)
    assert oauth_provider._refusal(response, ("A-SECRET-0", "R-SECRET-1", None)) == cause


async def test_a_token_that_expires_while_a_request_waits_for_the_sdks_lock_is_refreshed_under_the_hold(
    server: OAuthServer, tmp_path: Path
) -> None:
    """The SDK refreshes on its own when it finds the token expired under its lock, which another request of the
    same connection holds until its answer comes. By then another replica may have refreshed: the request must go
    through the hold and use that replica's tokens, not spend the old refresh token outside the hold."""
    a_store, b_store = (FileTokenStore(tmp_path / "oauth", wait=STORE_TIMEOUT) for _ in "ab")
    first = await authorized(server, a_store)
    config = code_config(server)
    assert config.oauth is not None
    storage = ServerStorage(a_store, "fx", server.url)
    provider = build_provider("fx", server.url, config.oauth, "authorization_code", storage)
    answers: list[int] = []

    async def request() -> None:
        answers.append((await http.get(server.url)).status_code)

    async with httpx2.AsyncClient(auth=provider) as http, pool_of({"fx": config}, b_store) as b:
        await request()  # the provider reads the stored tokens, valid still
        grants = Grants(server)
        # the SDK's lock held as another request of this connection holds it, waiting for its answer
        async with anyio.create_task_group() as tg, provider.context.lock:
            tg.start_soon(request)  # finds the token valid, then waits for the SDK's lock
            await until_expired(first)
            assert (await b.call("fx", "add", {"a": 1, "b": 2})).structured_content == {"result": 3}
    assert len(answers) == 2 and 401 not in answers, answers
    assert grants.since() == {"refresh_token": 1}  # the other replica's; this one used its tokens
    stored = await a_store.load("fx")
    assert stored is not None and stored.tokens is not None
    assert server.hook("access-tokens")[-1] == stored.tokens.access_token
