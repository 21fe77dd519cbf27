"""Two `onetool serve --http` replicas on one PostgreSQL store share the OAuth tokens of an upstream whose refresh
tokens are single-use (tests/fixtures/oauth_server.py): when the access token expires under both at once, one
refresh reaches the authorization server, and every call on both replicas goes through with its tokens. (Before
issue 22, each replica refreshed on its own: the loser's refresh was refused, and its calls said to run `onetool
auth` although the other replica held a valid token.)"""

from __future__ import annotations

import time
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from onetool.auth import StateTokenStore
from onetool.state import StateStore
from tests.gateways import text_of
from tests.postgres import create_database
from tests.replicas.conftest import Replica, replicas
from tests.upstream.test_oauth import Browser, OAuthServer, code_config, oauth_server, run_authorization

pytestmark = pytest.mark.anyio

TTL = 4  # seconds an access token lives: both replicas connect with it before it expires
CALLS = 4  # per replica, at once


@pytest.fixture(scope="module")
def server() -> Iterator[OAuthServer]:
    # refresh grants take a while, so two refreshes sent at once would overlap there and one would be refused
    with oauth_server("--ttl", str(TTL), "--refresh-delay", "0.5") as started:
        yield started


async def until(check: object, what: str, within: float = 15) -> None:
    with anyio.fail_after(within):
        while not check():  # type: ignore[operator]
            await anyio.sleep(0.05)


async def test_replicas_whose_token_expires_at_once_refresh_it_once_and_all_their_calls_work(
    server: OAuthServer, postgres: str, tmp_path: Path
) -> None:
    url = create_database(postgres, f"oauth_{uuid.uuid4().hex[:12]}")
    upstream = {"url": server.url, "oauth": {}, "connect_timeout": 5, "max_backoff": 0.5}
    with replicas(tmp_path, url, servers={"fx": upstream}) as (a, b):
        # `onetool auth fx` elsewhere; each replica then connects with the stored tokens
        async with await StateStore.open(url) as state:
            await run_authorization("fx", code_config(server), StateTokenStore(state), Browser())
            record = await StateTokenStore(state).load("fx")
        assert record is not None and record.expires_at is not None
        await until(lambda: all(connected(r) for r in (a, b)), "both replicas connected")
        assert time.time() < record.expires_at, "a replica connected too late to hold the first token"

        await anyio.sleep(record.expires_at - time.time() + 0.2)  # expired, on both
        before = Counter(server.hook("stats"))
        logged = {r.name: r.served.log.stat().st_size for r in (a, b)}
        outcomes: list[tuple[bool, str]] = []

        async def call(replica: Replica) -> None:
            result = await replica.served.run("fx.add(a=1, b=2)")
            outcomes.append((bool(result.is_error), text_of(result)))

        with anyio.fail_after(60):
            async with anyio.create_task_group() as tg:
                for replica in (a, b) * CALLS:
                    tg.start_soon(call, replica)
        after = Counter(server.hook("stats"))
        assert outcomes == [(False, "3")] * 2 * CALLS
        assert (after["refresh_token"] - before["refresh_token"], after["refused_refresh"]) == (1, 0)
        assert connected(a) and connected(b)

        secrets = set(server.hook("secrets"))
        for replica in (a, b):
            log = replica.served.log.read_text()
            since = log.encode()[logged[replica.name] :].decode()
            assert "onetool auth" not in since and " ERROR " not in since and " WARNING " not in since, since
            assert [s for s in secrets if s in log] == []


def connected(replica: Replica) -> bool:
    view = replica.server("fx") or {}
    return view.get("status") == "connected"
