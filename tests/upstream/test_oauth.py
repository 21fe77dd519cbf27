"""OAuth upstreams against a real OAuth-protected MCP server (tests/fixtures/oauth_server.py, on the SDK's
server auth): the authorization-code flow with dynamic registration and PKCE, refresh mid-session, client
credentials, state checks, pending authorization, 401 after initialize, and no secret in any log record."""

from __future__ import annotations

import logging
import stat
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import ExitStack, asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import anyio
import httpx2
import pytest
from mcp.client.auth.exceptions import OAuthTokenError
from mcp.client.auth.utils import handle_token_response_scopes
from mcp.shared.auth import OAuthToken

from onetool.auth import (
    FileTokenStore,
    FlowFailed,
    PendingFlows,
    ServerStorage,
    StateTokenStore,
    StoredAuth,
    TokenStore,
)
from onetool.auth.login import loopback_listener
from onetool.auth.traffic import oauth_problem
from onetool.config import ServerConfig
from onetool.errors import AuthError, UpstreamUnavailable
from onetool.state import StateStore
from onetool.upstream import UpstreamPool
from onetool.upstream.authorize import Authorized, authorize
from tests.config.test_config import error_of, write
from tests.conftest import FIXTURES, serve_on_a_free_port
from tests.fixtures.oauth_server import EXCHANGE_REFUSED
from tests.processes import stop
from tests.state.conftest import RecordingStore

OAUTH_SERVER = str(FIXTURES / "oauth_server.py")
TTL = 2  # seconds an access token lives on the fixture server


class OAuthServer:
    def __init__(self, port: int) -> None:
        self.base = f"http://127.0.0.1:{port}"
        self.url = f"{self.base}/mcp"

    def hook(self, path: str, method: str = "GET", body: str | None = None) -> Any:
        return httpx2.request(method, f"{self.base}/fixture/{path}", content=body).json()


@contextmanager
def oauth_server(*flags: str) -> Iterator[OAuthServer]:
    """The fixture server (tests/fixtures/oauth_server.py, access tokens living TTL seconds) while inside."""

    def start(port: int) -> subprocess.Popen[Any]:
        return subprocess.Popen([sys.executable, OAUTH_SERVER, str(port), "--ttl", str(TTL), *flags])

    proc, port = serve_on_a_free_port(start, _answers_as_the_fixture)
    try:
        yield OAuthServer(port)
    finally:
        stop(proc, 5)


def _answers_as_the_fixture(port: int) -> bool:
    """Whether the OAuth fixture (not some other server that took its port) answers on ``port``."""
    try:
        return httpx2.get(f"http://127.0.0.1:{port}/fixture/stats", timeout=2).status_code == 200
    except httpx2.HTTPError:
        return False


@pytest.fixture
def start_server() -> Iterator[Callable[..., OAuthServer]]:
    with ExitStack() as started:
        yield lambda *flags: started.enter_context(oauth_server(*flags))


@pytest.fixture
def server(start_server: Callable[..., OAuthServer]) -> OAuthServer:
    return start_server()


@pytest.fixture
def store(tmp_path: Path) -> FileTokenStore:
    return FileTokenStore(tmp_path / "state" / "oauth")


def code_config(server: OAuthServer, **oauth: Any) -> ServerConfig:
    return ServerConfig(url=server.url, oauth=oauth, connect_timeout=5)


def cc_config(server: OAuthServer, **extra: Any) -> ServerConfig:
    oauth = {"client_id": "cc-client", "client_secret": "cc-secret", "issuer": server.base, **extra}
    return ServerConfig(url=server.url, oauth=oauth, connect_timeout=5)


@dataclass(frozen=True)
class Page:
    status_code: int
    text: str


def fetch(url: str) -> Page:
    """GET ``url`` following redirects, as a browser would (urllib: its requests are not in any log)."""
    try:
        with urllib.request.urlopen(url, timeout=30) as response:
            return Page(response.status, response.read().decode())
    except urllib.error.HTTPError as e:
        return Page(e.code, e.read().decode())


class Browser:
    """Stands in for the user's browser: follows the authorization URL to the redirect, approving at once."""

    def __init__(self) -> None:
        self.urls: list[str] = []
        self.pages: list[Page] = []

    async def visit(self, url: str) -> Page:
        def follow() -> Page:
            page = fetch(url)
            self.pages.append(page)  # here, so a flow's failure that cancels the visit keeps the page
            return page

        return await anyio.to_thread.run_sync(follow)


@asynccontextmanager
async def browser_step(browser: Browser) -> AsyncIterator[Callable[[str], Any]]:
    async with anyio.create_task_group() as tg:

        async def show(url: str) -> None:
            browser.urls.append(url)
            tg.start_soon(browser.visit, url)

        yield show


async def run_authorization(name: str, config: ServerConfig, store: TokenStore, browser: Browser) -> Authorized:
    pending = PendingFlows()
    async with browser_step(browser) as show, loopback_listener(pending) as redirect_uri:
        return await authorize(name, config, store, pending=pending, redirect_uri=redirect_uri, show=show)


def levels(records: list[dict[str, Any]], fragment: str) -> list[str]:
    """The levels of the records whose message contains ``fragment``, in order."""
    return [r["level"] for r in records if fragment in r["message"]]


def oauth_reports(records: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """(level, message) of each report of a server's ``oauth_status``."""
    return [(r["level"], r["message"]) for r in records if r["extra"].get("oauth_status")]


@asynccontextmanager
async def pool_of(servers: dict[str, ServerConfig], store: TokenStore) -> AsyncIterator[UpstreamPool]:
    quick = {name: config.model_copy(update={"max_backoff": 0.5}) for name, config in servers.items()}
    async with UpstreamPool(quick, token_store=store, backoff_base=0.1) as pool:
        yield pool


# ---- authorization code ---------------------------------------------------------------------


async def test_authorization_code_with_registration_and_pkce_then_tools_work(
    server: OAuthServer, store: FileTokenStore
) -> None:
    browser = Browser()
    done = await run_authorization("fx", code_config(server), store, browser)
    assert done == Authorized("fx", 3)
    page = browser.pages[0]
    assert page.status_code == 200 and "Authorization complete" in page.text and "<b>fx</b>" in page.text
    query = parse_qs(urlsplit(browser.urls[0]).query)
    assert query["code_challenge_method"] == ["S256"] and "code_verifier" not in query
    assert query["redirect_uri"][0].startswith("http://127.0.0.1:")
    assert server.hook("stats") == {"registration": 1, "authorization_code": 1}

    record = await store.load("fx")
    assert record is not None and record.tokens is not None and record.client is not None
    assert record.url == server.url and record.tokens.refresh_token
    assert stat.S_IMODE(store.folder.stat().st_mode) == 0o700
    assert stat.S_IMODE((store.folder / "fx.json").stat().st_mode) == 0o600
    assert stat.S_IMODE((store.folder / "fx.lock").stat().st_mode) == 0o600  # what refreshes lock; empty
    assert sorted(p.name for p in store.folder.iterdir()) == ["fx.json", "fx.lock"]  # no temporary file left behind

    async with pool_of({"fx": code_config(server)}, store) as pool:
        status = pool.server_status("fx")
        assert (status.status, status.oauth_status, status.tool_count) == ("connected", "authenticated", 3)
        assert (await pool.call("fx", "add", {"a": 2, "b": 3})).structured_content == {"result": 5}


async def test_access_token_expires_and_is_refreshed_mid_session(server: OAuthServer, store: FileTokenStore) -> None:
    await run_authorization("fx", code_config(server), store, Browser())
    first = await store.load("fx")
    assert first is not None and first.tokens is not None
    async with pool_of({"fx": code_config(server)}, store) as pool:
        assert (await pool.call("fx", "add", {"a": 1, "b": 1})).structured_content == {"result": 2}
        await anyio.sleep(TTL + 0.5)
        assert (await pool.call("fx", "add", {"a": 1, "b": 2})).structured_content == {"result": 3}
        assert pool.server_status("fx").oauth_status == "authenticated"
    assert server.hook("stats")["refresh_token"] >= 1
    after = await store.load("fx")
    assert after is not None and after.tokens is not None
    assert after.tokens.refresh_token != first.tokens.refresh_token  # the rotated token was stored


async def test_a_refused_refresh_turns_the_server_to_pending_authorization(
    server: OAuthServer, store: FileTokenStore, log_records: list[dict[str, Any]]
) -> None:
    await run_authorization("fx", code_config(server), store, Browser())
    async with pool_of({"fx": code_config(server)}, store) as pool:
        assert pool.server_status("fx").connected
        server.hook("revoke", "POST")
        await anyio.sleep(TTL + 0.5)
        with pytest.raises(UpstreamUnavailable) as caught:
            await pool.call("fx", "add", {"a": 1, "b": 2})
        status = pool.server_status("fx")
    cause = "invalid_grant: refresh token does not exist"  # the fixture's (the SDK's) error_description
    reason = f"authorization required: the authorization server refused the stored refresh token ({cause})"
    assert str(caught.value) == f"server 'fx' is unavailable: {reason}; run `onetool auth fx`"
    assert (status.oauth_status, status.error, status.fix) == ("pending_authorization", reason, "run `onetool auth fx`")
    record = await store.load("fx")
    assert record is not None and record.tokens is None and record.client is not None  # registration kept
    assert record.refused == cause  # for every process sharing the record to report
    # Stored credentials stopped working: an ERROR, once, with what to do; the refusal itself is a refresh event.
    assert oauth_reports(log_records) == [
        ("INFO", "server 'fx': OAuth authenticated"),
        ("ERROR", f"server 'fx': {reason}; run `onetool auth fx`"),
    ]
    assert levels(log_records, f"the OAuth token refresh was refused ({cause})") == ["DEBUG"]


async def test_a_connect_reads_the_stored_record_once_and_the_next_attempt_reads_it_again(
    server: OAuthServer, tmp_path: Path
) -> None:
    url = f"sqlite:///{tmp_path / 'state.db'}"
    async with (
        await RecordingStore.open(url) as state,
        pool_of({"fx": code_config(server)}, StateTokenStore(state)) as pool,
    ):
        assert pool.server_status("fx").oauth_status == "pending_authorization"
        # `onetool auth fx` in another process: another store on the same file
        async with await StateStore.open(url) as elsewhere:
            await run_authorization("fx", code_config(server), StateTokenStore(elsewhere), Browser())
        with anyio.fail_after(15):
            while not pool.server_status("fx").connected:  # the retry reads the store again
                await anyio.sleep(0.05)
        state.transactions.clear()
        assert (await pool.put("fx", code_config(server))).connected
        assert (await pool.call("fx", "add", {"a": 2, "b": 3})).structured_content == {"result": 5}
        assert state.transactions == ["read the OAuth record of 'fx'"]  # tokens, client and expiry: one read


async def test_a_wrong_state_is_rejected_and_the_real_redirect_still_completes(
    server: OAuthServer, store: FileTokenStore
) -> None:
    browser = Browser()
    forged: list[Page] = []

    async def forge_then_visit(url: str) -> Page:
        redirect_uri = parse_qs(urlsplit(url).query)["redirect_uri"][0]
        forged.append(await anyio.to_thread.run_sync(fetch, f"{redirect_uri}?code=stolen&state=forged"))
        return await Browser.visit(browser, url)

    browser.visit = forge_then_visit  # type: ignore[method-assign]
    assert await run_authorization("fx", code_config(server), store, browser) == Authorized("fx", 3)
    assert forged[0].status_code == 400 and "invalid or has expired" in forged[0].text
    assert browser.pages[0].status_code == 200


async def test_pending_flows_match_by_state_across_servers_and_expire() -> None:
    flows = PendingFlows(ttl=0.3, exchange_wait=0.1)
    github, linear = flows.register("s-github", "github"), flows.register("s-linear", "linear")
    page = await flows.resolve({"state": "s-linear", "error": "access_denied"})
    assert page.status == 400 and page.server == "linear" and "access_denied" in page.html
    with pytest.raises(FlowFailed, match="access_denied"):
        await linear.wait()
    page = await flows.resolve({"state": "s-github", "code": "c0de"})
    assert page.server == "github" and (await github.wait()).code == "c0de"
    assert page.status == 202  # the exchange did not report back within exchange_wait
    assert (await flows.resolve({"state": "s-github", "code": "again"})).status == 400  # one use per state

    late = flows.register("s-late", "late")
    with pytest.raises(FlowFailed, match="no answer from the browser"):
        await late.wait()
    page = await flows.resolve({"state": "s-late", "code": "c0de"})
    assert page.status == 400 and "expired" in page.html and page.server is None


# ---- client credentials, startup, 401 after initialize ----------------------------------------


async def test_client_credentials_server(server: OAuthServer, store: FileTokenStore) -> None:
    async with pool_of({"m2m": cc_config(server)}, store) as pool:
        assert pool.server_status("m2m").oauth_status == "authenticated"
        assert (await pool.call("m2m", "add", {"a": 1, "b": 1})).structured_content == {"result": 2}
        await anyio.sleep(TTL + 0.5)  # no refresh token in this grant: a new one is fetched
        assert (await pool.call("m2m", "add", {"a": 2, "b": 2})).structured_content == {"result": 4}
    assert server.hook("stats")["client_credentials"] >= 2


async def test_wrong_client_secret_is_an_authentication_failure(
    server: OAuthServer, store: FileTokenStore, log_records: list[dict[str, Any]]
) -> None:
    async with pool_of({"m2m": cc_config(server, client_secret="wrong")}, store) as pool:
        status = pool.server_status("m2m")
    assert (status.status, status.oauth_status) == ("failed", "authentication_failed")
    assert status.error is not None and status.error.startswith("OAuth authentication failed: Token exchange failed")
    assert status.fix == "check servers.m2m.oauth"
    assert oauth_reports(log_records) == [("ERROR", f"server 'm2m': {status.error}; check servers.m2m.oauth")]


async def test_pending_authorization_at_startup_leaves_other_servers_working(
    server: OAuthServer, store: FileTokenStore, log_records: list[dict[str, Any]]
) -> None:
    async with pool_of({"fx": code_config(server), "m2m": cc_config(server)}, store) as pool:
        fx = pool.server_status("fx")
        assert (fx.status, fx.oauth_status) == ("failed", "pending_authorization")
        assert (fx.error, fx.fix) == ("authorization required: no stored tokens", "run `onetool auth fx`")
        with pytest.raises(UpstreamUnavailable, match=r"authorization required.*; run `onetool auth fx`$"):
            await pool.call("fx", "add", {"a": 1, "b": 2})
        assert (await pool.call("m2m", "add", {"a": 1, "b": 2})).structured_content == {"result": 3}
    assert [report for report in oauth_reports(log_records) if "'fx'" in report[1]] == [
        ("WARNING", "server 'fx': authorization required: no stored tokens; run `onetool auth fx`")
    ]
    assert [r for r in log_records if r["level"] == "ERROR"] == []  # not yet authorized is not an error
    assert server.hook("stats").get("registration") is None  # no stray registration without a browser


async def test_401_after_initialize_on_a_plain_server_is_a_clear_failure(
    start_server: Callable[..., OAuthServer], store: FileTokenStore, log_records: list[dict[str, Any]]
) -> None:
    plain = start_server("--no-auth", "--reject-list")
    async with pool_of({"p": ServerConfig(url=plain.url, connect_timeout=5)}, store) as pool:
        status = pool.server_status("p")
    assert (status.status, status.error, status.oauth_status) == ("failed", "HTTP 401 Unauthorized", None)
    retries = [r["message"] for r in log_records if "reconnect attempt 1 failed" in r["message"]]
    assert retries[0].startswith("server 'p': reconnect attempt 1 failed (HTTP 401 Unauthorized)")


async def test_401_after_initialize_on_an_oauth_server_gives_the_same_status_as_at_connect(
    server: OAuthServer, store: FileTokenStore, log_records: list[dict[str, Any]]
) -> None:
    await run_authorization("fx", code_config(server), store, Browser())
    server.hook("reject-list", "POST")  # initialize passes, tools/list answers 401
    async with pool_of({"fx": code_config(server)}, store) as pool:
        status = pool.server_status("fx")
    reason = "authorization required: the server refused the stored token"
    assert (status.status, status.oauth_status, status.error, status.fix) == (
        "failed",
        "pending_authorization",
        reason,
        "run `onetool auth fx`",
    )
    retries = [r["message"] for r in log_records if "reconnect attempt 1 failed" in r["message"]]
    assert retries == [
        f"server 'fx': reconnect attempt 1 failed ({reason}); next in " + retries[0].split("next in ")[1]
    ]
    connect = [r["extra"] for r in log_records if r["extra"].get("span") == "proxy.connect"]
    assert connect[0]["errorType"] == "UpstreamUnavailable" and reason in connect[0]["errorMessage"]
    assert oauth_reports(log_records) == [("ERROR", f"server 'fx': {reason}; run `onetool auth fx`")]


async def test_pending_authorization_turns_from_warning_to_error_when_the_stored_token_is_refused(
    server: OAuthServer, store: FileTokenStore, tmp_path: Path, log_records: list[dict[str, Any]]
) -> None:
    elsewhere = FileTokenStore(tmp_path / "elsewhere")
    await run_authorization("fx", code_config(server), elsewhere, Browser())
    async with pool_of({"fx": code_config(server)}, store) as pool:
        assert pool.server_status("fx").error == "authorization required: no stored tokens"
        server.hook("reject-list", "POST")
        record = await elsewhere.load("fx")
        assert record is not None
        await store.save("fx", record)  # tokens arrive, and the server refuses them
        reason = "authorization required: the server refused the stored token"
        with anyio.fail_after(15):
            while pool.server_status("fx").error != reason:
                await anyio.sleep(0.05)
        assert pool.server_status("fx").oauth_status == "pending_authorization"  # the same status, now an error
    assert oauth_reports(log_records) == [
        ("WARNING", "server 'fx': authorization required: no stored tokens; run `onetool auth fx`"),
        ("ERROR", f"server 'fx': {reason}; run `onetool auth fx`"),
    ]


async def test_a_token_exchange_refused_after_a_valid_code_answers_the_callback_with_an_error_page(
    start_server: Callable[..., OAuthServer], store: FileTokenStore, log_records: list[dict[str, Any]]
) -> None:
    server = start_server("--fail-exchange")
    browser = Browser()
    with pytest.RaisesGroup(AuthError, flatten_subgroups=True) as caught:  # the test's browser and listener
        await run_authorization("fx", code_config(server), store, browser)
    error = caught.value
    while isinstance(error, BaseExceptionGroup):
        [error] = error.exceptions
    reason = f'Token exchange failed (400): {{"error":"invalid_grant","error_description":"{EXCHANGE_REFUSED}"}}'
    assert isinstance(error, AuthError) and str(error) == f"server 'fx': authorization failed: {reason}"
    assert server.hook("stats") == {"registration": 1, "refused_exchange": 1}  # the code was good; its exchange not

    [page] = browser.pages
    assert page.status_code == 400 and "<title>OneTool: Authorization failed</title>" in page.text
    assert "OneTool could not be authorized for server <b>fx</b>: Token exchange failed (400)" in page.text
    assert "invalid_grant" in page.text and EXCHANGE_REFUSED in page.text
    assert "Run <code>onetool auth fx</code> to try again." in page.text
    record = await store.load("fx")
    assert record is None or record.tokens is None

    fx = [r for r in log_records if r["extra"].get("server") == "fx"]
    assert levels(fx, "OAuth authorization failed") == ["ERROR"]
    assert f"server 'fx': OAuth authorization failed: {reason}; run `onetool auth fx` again" in [
        r["message"] for r in fx
    ]
    assert levels(fx, "OAuth callback state valid; exchanging the code") == ["DEBUG"]
    assert levels(fx, "OAuth callback outcome: the token exchange failed") == ["DEBUG"]
    assert levels(fx, "OAuth authorization succeeded") == []
    secrets = set(server.hook("secrets")) | set(parse_qs(urlsplit(browser.urls[0]).query)["state"])
    logged = [r["message"] + " " + repr(r["extra"]) for r in log_records]
    assert [secret for secret in secrets for line in logged if secret in line] == []


# ---- logging and storage ----------------------------------------------------------------------


async def test_no_token_code_verifier_state_or_secret_in_any_log_record(
    server: OAuthServer, store: FileTokenStore, log_records: list[dict[str, Any]]
) -> None:
    stdlib: list[str] = []

    class Capture(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            stdlib.append(record.getMessage() + (self.format(record) if record.exc_info else ""))

    handler, root = Capture(level=logging.DEBUG), logging.getLogger()
    previous = root.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    try:
        browser = Browser()
        await run_authorization("fx", code_config(server), store, browser)
        async with pool_of({"fx": code_config(server), "m2m": cc_config(server)}, store) as pool:
            await anyio.sleep(TTL + 0.5)
            await pool.call("fx", "add", {"a": 1, "b": 2})  # refreshed
            await pool.call("m2m", "add", {"a": 1, "b": 2})
    finally:
        root.removeHandler(handler)
        root.setLevel(previous)
    secrets = set(server.hook("secrets")) | set(parse_qs(urlsplit(browser.urls[0]).query)["state"])
    assert server.hook("stats")["refresh_token"] >= 1 and len(secrets) >= 6
    records = [r["message"] + " " + repr(r["extra"]) for r in log_records] + stdlib
    assert any("OAuth discovery at" in r for r in records) and any("refreshed" in r for r in records)
    leaks = [(secret, record) for secret in secrets for record in records if secret in record]
    assert leaks == []


async def test_log_levels_of_discovery_success_refresh_and_the_callback(
    server: OAuthServer, store: FileTokenStore, log_records: list[dict[str, Any]]
) -> None:
    browser = Browser()
    await run_authorization("fx", code_config(server), store, browser)
    async with pool_of({"fx": code_config(server)}, store) as pool:
        await anyio.sleep(TTL + 0.5)
        assert (await pool.call("fx", "add", {"a": 1, "b": 2})).structured_content == {"result": 3}  # refreshed
    assert server.hook("stats")["refresh_token"] >= 1

    fx = [r for r in log_records if r["extra"].get("server") == "fx"]
    discovery = [r for r in fx if "OAuth discovery at" in r["message"]]
    assert discovery and {r["level"] for r in discovery} == {"DEBUG"}
    assert all(r["extra"]["endpoint"].startswith(f"{server.base}/.well-known/") for r in discovery)
    assert levels(fx, "OAuth callback state valid; exchanging the code") == ["DEBUG"]
    assert levels(fx, "OAuth callback outcome: authorized") == ["DEBUG"]
    refresh = levels(fx, "refreshing the OAuth access token") + levels(fx, "OAuth access token refreshed")
    assert refresh and set(refresh) == {"DEBUG"}
    success = [r for r in fx if "OAuth authorization succeeded" in r["message"]]
    assert [(r["level"], r["message"]) for r in success] == [
        ("INFO", "server 'fx': OAuth authorization succeeded; tokens stored")
    ]
    assert oauth_reports(fx) == [("INFO", "server 'fx': OAuth authenticated")]
    assert [r for r in fx if r["level"] in ("WARNING", "ERROR")] == []
    stored = await store.load("fx")
    assert stored is not None and stored.tokens is not None
    tokens = set(server.hook("secrets"))
    assert [t for t in tokens for r in success if t in r["message"] + repr(r["extra"])] == []


async def test_callback_outcomes_are_logged_at_debug_without_code_or_state(log_records: list[dict[str, Any]]) -> None:
    pending = PendingFlows(exchange_wait=0.1)
    for state, server in (("st-refused", "a"), ("st-nocode", "b"), ("st-code", "c")):
        pending.register(state, server)
    queries = (
        "state=st-forged&code=c0de-forged",
        "state=st-refused&error=access_denied",
        "state=st-nocode",
        "state=st-code&code=c0de-real",
    )
    async with loopback_listener(pending) as redirect_uri:
        pages = [await anyio.to_thread.run_sync(fetch, f"{redirect_uri}?{query}") for query in queries]
    assert [page.status_code for page in pages] == [400, 400, 400, 202]
    assert "<b>b</b>: the redirect carried no authorization code" in pages[2].text
    callback = [(r["level"], r["message"]) for r in log_records if "callback" in r["message"]]
    assert callback == [
        ("DEBUG", "OAuth callback: state matches no pending authorization; rejected"),
        ("DEBUG", "server 'a': OAuth callback state valid; the authorization server refused"),
        ("DEBUG", "server 'b': OAuth callback state valid; the redirect carried no code"),
        ("DEBUG", "server 'c': OAuth callback state valid; exchanging the code"),
        ("DEBUG", "server 'c': OAuth callback answered before the token exchange finished"),
    ]
    logged = repr(log_records)
    assert "c0de" not in logged and "st-" not in logged


def test_flow_inference_is_logged_at_info(
    server: OAuthServer, monkeypatch: pytest.MonkeyPatch, log_records: list[dict[str, Any]]
) -> None:
    from onetool.auth import resolve_flow

    monkeypatch.delenv("DISPLAY", raising=False)
    monkeypatch.delenv("WAYLAND_DISPLAY", raising=False)
    config = cc_config(server)
    assert config.oauth is not None and resolve_flow("m2m", config.oauth) == "client_credentials"
    assert resolve_flow("fx", code_config(server).oauth) == "authorization_code"  # type: ignore[arg-type]
    assert resolve_flow("x", cc_config(server, grant="authorization_code").oauth) == "authorization_code"  # type: ignore[arg-type]
    infos = [(r["level"], r["message"]) for r in log_records if "OAuth flow" in r["message"]]
    assert infos == [
        ("INFO", "server 'm2m': OAuth flow client_credentials (inferred: a client secret and no browser)"),
        ("INFO", "server 'fx': OAuth flow authorization_code (inferred: no client secret)"),
    ]


@pytest.mark.parametrize("kind", ["file", "state"])
async def test_token_store_ignores_a_record_for_another_url(kind: str, tmp_path: Path) -> None:
    async with await StateStore.open(f"sqlite:///{tmp_path / 'state.db'}") as state:
        store: TokenStore = FileTokenStore(tmp_path / "oauth") if kind == "file" else StateTokenStore(state)
        await store.save("fx", StoredAuth(url="http://127.0.0.1:1/mcp", tokens=OAuthToken(access_token="old")))
        assert await ServerStorage(store, "fx", "http://127.0.0.1:2/mcp").get_tokens() is None
        assert await ServerStorage(store, "fx", "http://127.0.0.1:1/mcp").get_tokens() is not None
        assert await store.forget("fx") and not await store.forget("fx")
        assert await store.load("fx") is None


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ("{url: 'http://x/mcp', oauth: {client_idd: a}}", "oauth.client_idd: unknown key; did you mean 'client_id'?"),
        ("{command: x, oauth: {}}", "oauth cannot be used with a stdio ('command') server"),
        ("{url: 'http://x/mcp', oauth: {grant: client_credentials}}", "grant client_credentials needs client_id"),
        ("{url: 'http://x/mcp', oauth: {client_secret: s3cr3t}}", "client_secret needs client_id"),
        ("{url: 'http://x/mcp', oauth: {redirect_uri: 'ftp://x'}}", "redirect_uri must be an http(s) URL"),
    ],
)
def test_oauth_config_is_strict(tmp_path: Path, entry: str, message: str) -> None:
    error = error_of(write(tmp_path, f"servers:\n  s: {entry}\n"))
    assert message in error and "s3cr3t" not in error


async def test_a_malformed_token_response_never_shows_its_tokens() -> None:
    """The SDK's error for a token response it cannot read goes on with pydantic's echo of the response: what
    a server's status, the log and the model read of it is its first line only."""
    body = b'{"accessToken": "SECRET-ACCESS-123456789", "refresh": "SECRET-REFRESH-987654321", "token_type": "x"}'
    with pytest.raises(OAuthTokenError) as caught:
        await handle_token_response_scopes(httpx2.Response(200, content=body))
    assert "SECRET" in str(caught.value)  # what the SDK says: the tokens are in it
    shown = oauth_problem(caught.value)
    assert "SECRET" not in shown and shown.startswith("Invalid token response")
