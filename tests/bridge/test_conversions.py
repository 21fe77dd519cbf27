"""The gateway's conversions against real bridge processes: convert, revert, re-registration after a restart, and
the stops a revert owes a bridge it could not reach.

The converted server is server-everything over stdio, the cheapest real one to start: what is tested is the
gateway's side, whichever stdio server the bridge runs (tests/bridge/test_mcp.py serves both eras)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import anyio
import pytest
from anyio.streams.memory import MemoryObjectReceiveStream

from onetool.config import ServerConfig
from onetool.control.bridge_client import BridgeClient
from onetool.control.conversions import Conversions
from onetool.errors import BridgeUnavailable
from onetool.state import StateStore
from onetool.upstream import UpstreamPool
from tests.bridge.conftest import TOKEN, BridgeProcess, Relay, until
from tests.conftest import EVERYTHING_JS, free_port
from tests.state.conftest import RecordingStore

pytestmark = pytest.mark.anyio
ECHO = ServerConfig(command="node", args=[str(EVERYTHING_JS), "stdio"], timeout=12)


def empty(bridge: BridgeProcess) -> None:
    """Stop whatever a test left on the module's bridge (tests/bridge/conftest.py), which the next test shares."""
    for server in bridge.api("GET", "/convert").json()["servers"]:
        bridge.api("DELETE", f"/convert/{server['serverName']}")


async def _echo(pool: UpstreamPool) -> str:
    with anyio.fail_after(30):
        while not pool.server_status("echo").connected:
            await anyio.sleep(0.05)
    return str((await pool.call("echo", "echo", {"message": "ping"})).content[0].text)  # type: ignore[union-attr]


async def test_convert_revert_and_reregister_after_bridge_restarts(bridge_factory: Any, tmp_path: Path) -> None:
    port, base = str(free_port()), str(free_port())
    bridge: BridgeProcess = bridge_factory("--port", port, "--base-port", base)
    client = BridgeClient(bridge.url, TOKEN)
    async with await StateStore.open(f"sqlite+aiosqlite:///{tmp_path / 'state.db'}") as store:
        conversions = Conversions(client, store)
        entry = await conversions.convert("echo", ECHO, actor="api")
        assert entry.url == f"http://127.0.0.1:{base}/mcp" and entry.timeout == 12
        record = await store.conversion("echo")
        assert record is not None and record.url == entry.url

        moved: list[tuple[str, str]] = []

        async def on_moved(name: str, url: str) -> None:
            moved.append((name, url))

        async with UpstreamPool({"echo": entry}, probe_interval=0.3, backoff_base=0.1) as pool:
            assert await _echo(pool) == "Echo: ping"

            def is_down(name: str) -> bool:
                return not pool.server_status(name).connected

            async with anyio.create_task_group() as tg:
                tg.start_soon(conversions.keep_registered, pool.subscribe, is_down, on_moved)
                # The bridge restarts on the same ports: it knows nothing, the gateway re-registers, the call works.
                bridge.stop()
                bridge = bridge_factory("--port", port, "--base-port", base)
                with anyio.fail_after(30):
                    while bridge.api("GET", "/convert/echo").status_code != 200:
                        await anyio.sleep(0.1)
                assert await _echo(pool) == "Echo: ping", "back without an admin action"
                assert moved == []
                # Restarted on other ports: the server moves, the store follows, the caller is told.
                other = free_port()
                bridge.stop()
                bridge = bridge_factory("--port", port, "--base-port", str(other))
                with anyio.fail_after(30):
                    while not moved:
                        await anyio.sleep(0.1)
                assert moved == [("echo", f"http://127.0.0.1:{other}/mcp")]
                record = await store.conversion("echo")
                assert record is not None and record.url == moved[0][1]
                tg.cancel_scope.cancel()

        assert await conversions.revert("echo", actor="api") is not None
        assert bridge.api("GET", "/convert/echo").status_code == 404
        assert await store.conversion("echo") is None
        assert await conversions.revert("echo", actor="api") is None, "reverting twice: 404 ignored, no record"


async def test_the_registration_loop_asks_the_store_only_when_a_converted_server_is_down(tmp_path: Path) -> None:
    # No bridge listens here: a re-registration fails (logged), which is all this test needs of it.
    client = BridgeClient(f"http://127.0.0.1:{free_port()}", TOKEN)
    store = await RecordingStore.open(f"sqlite:///{tmp_path / 'state.db'}")
    async with store:
        await store.record_conversion("time", command="x", args=[], env={}, url="http://127.0.0.1:1/mcp", actor="api")
        down: set[str] = set()
        send, receive = anyio.create_memory_object_stream[str]()  # unbuffered: a send returns once it is taken

        @asynccontextmanager
        async def changes() -> AsyncIterator[MemoryObjectReceiveStream[str]]:
            async with receive:
                yield receive

        async def on_moved(name: str, url: str) -> None:
            raise AssertionError("the bridge cannot have moved it: there is none")

        store.transactions.clear()
        async with anyio.create_task_group() as tg:
            tg.start_soon(Conversions(client, store).keep_registered, changes, down.__contains__, on_moved)
            # Each send returns once the loop is back for the next change: all before it was handled. ("other"
            # is never down, so it may be handled while "time" goes down.)
            for name in ("time", "other", "time", "other"):  # status changes of servers that are up
                await send.send(name)
            # the start-up pass only (it re-registers every converted server)
            assert store.transactions == ["read the converted servers", "read the conversion of 'time'"]
            down.add("time")
            await send.send("time")
            await send.send("other")
            # which are converted? (re-registering it again waits for RETRY_SECONDS)
            assert store.transactions[2:] == ["read the converted servers"]
            await send.aclose()  # the end of the changes: the loop returns


async def test_a_revert_the_bridge_missed_is_finished_in_the_background(bridge: BridgeProcess, tmp_path: Path) -> None:
    api = urlsplit(bridge.url)
    relay = Relay((str(api.hostname), int(api.port or 0)))
    try:
        async with await StateStore.open(f"sqlite+aiosqlite:///{tmp_path / 'state.db'}") as store:
            conversions = Conversions(BridgeClient(relay.url, TOKEN), store)
            for name in ("a", "b"):
                await conversions.convert(name, ECHO, actor="api")
            first = set(bridge.children())
            assert len(first) == 2 and bridge.api("GET", "/convert").json()["count"] == 2

            relay.cut()  # the bridge keeps running both; the gateway cannot reach it
            for name in ("a", "b"):
                record = await conversions.revert(name, actor="api")
                assert record is not None and record.server == name
            assert await store.conversions() == {}, "reverted here at once, bridge or not"
            assert conversions.unstopped() == {"a", "b"}
            assert bridge.api("GET", "/convert").json()["count"] == 2
            with pytest.raises(BridgeUnavailable):
                await conversions.convert("a", ECHO, actor="api")
            assert await store.conversions() == {}, "a convert that could not finish the owed stop changed nothing"

            bridge.api("DELETE", "/convert/b")  # someone else stops it: the bridge will say it is gone (404)
            relay.restore()
            # Converting "a" again first finishes its stop: a fresh process, and no late DELETE may end it.
            await conversions.convert("a", ECHO, actor="api")
            assert conversions.unstopped() == {"b"}
            fresh = set(bridge.children())
            assert len(fresh) == 1 and not fresh & first, "the old 'a' stopped, a new one started"

            async with anyio.create_task_group() as tg:
                tg.start_soon(conversions.finish_stops)
                await until(lambda: not conversions.unstopped(), what="the owed stop of 'b' to end (404)")
                await anyio.sleep(1.0)  # a retry loop that would DELETE "a" has had time to
                tg.cancel_scope.cancel()
            assert bridge.api("GET", "/convert/a").status_code == 200
            assert set(bridge.children()) == fresh
            assert set(await store.conversions()) == {"a"}
    finally:
        relay.cut()
        empty(bridge)


async def test_owed_stops_are_retried_until_the_bridge_answers(bridge: BridgeProcess, tmp_path: Path) -> None:
    api = urlsplit(bridge.url)
    relay = Relay((str(api.hostname), int(api.port or 0)))
    try:
        async with await StateStore.open(f"sqlite+aiosqlite:///{tmp_path / 'state.db'}") as store:
            conversions = Conversions(BridgeClient(relay.url, TOKEN), store)
            await conversions.convert("echo", ECHO, actor="api")
            relay.cut()
            await conversions.revert("echo", actor="api")
            async with anyio.create_task_group() as tg:
                tg.start_soon(conversions.finish_stops)
                await anyio.sleep(2.0)  # retries at 0.5 s and 1.5 s: both refused
                assert conversions.unstopped() == {"echo"} and len(bridge.children()) == 1
                relay.restore()
                await until(lambda: not conversions.unstopped(), timeout=10, what="the retried stop")
                tg.cancel_scope.cancel()
            assert bridge.api("GET", "/convert/echo").status_code == 404
            await until(lambda: not bridge.children(), what="the bridged process to end")
    finally:
        relay.cut()
        empty(bridge)
