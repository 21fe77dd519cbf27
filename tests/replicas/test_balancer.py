"""HAProxy in front of two replicas on one PostgreSQL: the shipped deploy/haproxy.cfg, run as it is (its addresses
given through the environment, as compose gives them), in front of two real `onetool serve --http` gateways.

Through the balancer: requests go round-robin to both replicas and every one succeeds; an admin change made on one
replica is seen by runs through the balancer whichever replica serves them; a handshake-era session stays on the
replica that issued it; the replicas accept the balancer's Host and refuse any other.

Which replica served a run is told by the replica itself: each one runs its own `who` server (the fault fixture
server) and `who.pid()` is that process's pid.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from itertools import pairwise
from typing import Any
from urllib.parse import urlsplit

import anyio
import httpx2
import pytest
from mcp import Client, types
from mcp.client.streamable_http import streamable_http_client

from tests.admin_api import admin
from tests.conftest import free_port
from tests.gateways import get, text_of
from tests.haproxy import missing, running_haproxy
from tests.replicas.conftest import TOKEN, Replica, fx_spec, replicas

pytestmark = [pytest.mark.anyio, pytest.mark.skipif(missing() is not None, reason=str(missing()))]

SEEN_WITHIN = 2.0
"""Seconds from an admin change on one replica until runs through the balancer see it, whichever replica serves
them (the requirement's bound; NOTIFY makes it tens of milliseconds)."""

LIST_SERVERS = "[[s['name'] for s in proxy.list_servers()], who.pid()]"
"""A run that says which servers it sees, and which replica ran it."""

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "test", "version": "0"}},
}
MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


@dataclass(frozen=True)
class Balanced:
    url: str
    """The balancer's /mcp."""
    replicas: tuple[Replica, Replica]
    names: dict[int, str]
    """The pid of each replica's `who` server -> that replica's name."""

    @property
    def host(self) -> str:
        return urlsplit(self.url).netloc

    def replica(self, name: str) -> Replica:
        return next(r for r in self.replicas if r.name == name)

    def served_by(self, result: types.CallToolResult) -> tuple[Any, str]:
        """The run's value, without the pid, and the replica that ran it."""
        assert not result.is_error, text_of(result)
        assert result.structured_content is not None, text_of(result)
        value = result.structured_content["result"]
        return (value[0], self.names[value[1]]) if isinstance(value, list) else (None, self.names[value])


def admin_run(url: str, code: str) -> Any:
    """A snippet's value, run through the admin API of the gateway (or balancer) at ``url``: one HTTP request."""
    status, body = admin(url, "POST", "/admin/run", {"code": code}, token=TOKEN)
    assert status == 200 and not body.get("isError"), (status, body)
    return body["structuredContent"]["result"]


@pytest.fixture(scope="module")
def balanced(pg_state: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Balanced]:
    base = tmp_path_factory.mktemp("balancer")
    port = free_port()
    # The balancer passes the client's Host through: the replicas must accept the one clients use for it.
    http = {"allowed_hosts": [f"127.0.0.1:{port}"]}
    with replicas(base, pg_state, servers={"who": fx_spec()}, http=http) as (a, b):
        env = {
            "ONETOOL_LB_BIND": f"127.0.0.1:{port}",
            "ONETOOL_A": urlsplit(a.url).netloc,
            "ONETOOL_B": urlsplit(b.url).netloc,
        }
        names = {admin_run(r.url, "who.pid()"): r.name for r in (a, b)}
        assert len(names) == 2, names
        with running_haproxy(port, env, base / "haproxy.log"):
            yield Balanced(f"http://127.0.0.1:{port}/mcp", (a, b), names)


@asynccontextmanager
async def session_client(url: str, sessions: list[str]) -> AsyncIterator[Client]:
    """A handshake-era client on ``url``; ``sessions`` gets the Mcp-Session-Id of each response it receives."""

    async def record(response: httpx2.Response) -> None:
        if session := response.headers.get("mcp-session-id"):
            sessions.append(session)

    timeout = httpx2.Timeout(30, read=300)
    async with (
        httpx2.AsyncClient(event_hooks={"response": [record]}, timeout=timeout) as http,
        Client(streamable_http_client(url, http_client=http), mode="legacy", read_timeout_seconds=60) as client,
    ):
        yield client


async def test_requests_go_round_robin_to_both_replicas_and_all_succeed(balanced: Balanced) -> None:
    # One HTTP request per run: the balancer alternates.
    order = [balanced.names[admin_run(balanced.url, "who.pid()")] for _ in range(6)]
    assert set(order) == {"A", "B"}, order
    assert all(one != next_one for one, next_one in pairwise(order)), order

    # A 2026-07-28 client holds no session: its calls are balanced one by one, and every one succeeds.
    async with Client(balanced.url, read_timeout_seconds=60) as client:
        served = [balanced.served_by(await client.call_tool("run", {"code": "who.pid()"}))[1] for _ in range(6)]
    assert set(served) == {"A", "B"}, served

    for path in ("/ready", "/health", "/status"):
        for _ in range(2):
            status, body = get(balanced.url, path)
            assert status == 200, (path, body)


async def until_each_replica(client: Client, balanced: Balanced, sees: Any) -> dict[str, float]:
    """Run LIST_SERVERS through the balancer until it ran on each replica with ``sees(servers)`` true; when that
    happened, in seconds from now. A replica that saw it and then does not any more fails the test."""
    start = time.monotonic()
    seen: dict[str, float] = {}
    while len(seen) < 2:
        servers, replica = balanced.served_by(await client.call_tool("run", {"code": LIST_SERVERS}))
        if sees(servers):
            seen.setdefault(replica, time.monotonic() - start)
        else:
            assert replica not in seen, f"replica {replica} showed {servers} after it had applied the change"
        assert time.monotonic() - start < SEEN_WITHIN, f"within {SEEN_WITHIN} s only {sorted(seen)} applied it"
        await anyio.sleep(0.01)
    return seen


async def test_an_admin_change_on_one_replica_reaches_runs_through_the_balancer(balanced: Balanced) -> None:
    a, b = balanced.replica("A"), balanced.replica("B")
    async with Client(balanced.url, read_timeout_seconds=60) as client:
        await until_each_replica(client, balanced, lambda servers: "fx" in servers)

        assert a.admin("POST", "/admin/servers/fx/quarantine")[0] == 200
        await until_each_replica(client, balanced, lambda servers: "fx" not in servers)

        # The other way round, so the module's replicas end as they began.
        assert b.admin("POST", "/admin/servers/fx/approve")[0] == 200
        await until_each_replica(client, balanced, lambda servers: "fx" in servers)


async def test_a_handshake_era_session_stays_on_its_replica(balanced: Balanced) -> None:
    homes: set[str] = set()
    # The session starts on whichever replica answers `initialize`; open sessions until each replica holds one.
    for _ in range(4):
        sessions: list[str] = []
        async with (
            session_client(balanced.url, sessions) as legacy,
            Client(balanced.url, read_timeout_seconds=60) as modern,
        ):
            served, others = set(), set()
            for _ in range(4):
                served.add(balanced.served_by(await legacy.call_tool("run", {"code": "who.pid()"}))[1])
                others.add(balanced.served_by(await modern.call_tool("run", {"code": "who.pid()"}))[1])
            assert len(served) == 1, f"the session's calls were served by {served}"
            assert others == {"A", "B"}, f"a client without a session was served by {others} only"
            (home,) = served
            homes.add(home)

            # Only the balancer's stickiness kept it working: the other replica does not know the session.
            assert len(set(sessions)) == 1, sessions
            other = next(r for r in balanced.replicas if r.name != home)
            async with httpx2.AsyncClient(timeout=30) as http:
                headers = {**MCP_HEADERS, "Mcp-Session-Id": sessions[0], "Mcp-Protocol-Version": "2025-11-25"}
                ping = {"jsonrpc": "2.0", "id": 2, "method": "ping"}
                answer = await http.post(other.url, json=ping, headers=headers)
                assert answer.status_code == 404, (answer.status_code, answer.text)
        if homes == {"A", "B"}:
            break
    assert homes == {"A", "B"}, f"every session started on {homes}"


async def test_the_replicas_accept_the_balancers_host_and_refuse_others(balanced: Balanced) -> None:
    async with httpx2.AsyncClient(timeout=30) as http:
        # Requests without a session go round-robin: two in a row reach both replicas.
        for _ in range(2):
            refused = await http.post(
                balanced.url, json=INITIALIZE, headers={**MCP_HEADERS, "Host": "elsewhere.example:80"}
            )
            assert refused.status_code == 421, (refused.status_code, refused.text)
        for _ in range(2):
            accepted = await http.post(balanced.url, json=INITIALIZE, headers=MCP_HEADERS)
            assert accepted.status_code == 200, (accepted.status_code, accepted.text)
            session = {"Mcp-Session-Id": accepted.headers["mcp-session-id"], "Mcp-Protocol-Version": "2025-11-25"}
            assert (await http.delete(balanced.url, headers=session)).status_code == 200
