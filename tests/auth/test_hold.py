"""``TokenStore.hold``: a server's OAuth record held against every other holder and writer, in any process, for one
token refresh at a time (tests/auth/test_refresh.py). On PostgreSQL (a row lock), a SQLite file (a lock file per server)
and a token folder (a file lock), each opened twice, as two replicas have them."""

from __future__ import annotations

import signal
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import anyio
import pytest
from mcp.shared.auth import OAuthToken

from onetool.auth import StateTokenStore, StoredAuth
from onetool.errors import StateError
from onetool.state import StateStore
from tests.auth.conftest import STORE_TIMEOUT, Kind, SharedStore, state_url
from tests.conftest import FIXTURES
from tests.processes import start_and_read_line, stop

URL = "http://127.0.0.1:1/mcp"


def record(n: int) -> StoredAuth:
    return StoredAuth(url=URL, tokens=OAuthToken(access_token=f"access-{n}", refresh_token=f"refresh-{n}"))


async def test_a_holder_waits_for_the_hold_then_reads_what_it_stored(shared: SharedStore) -> None:
    await shared.a.save("fx", record(0))
    seen: list[StoredAuth | None] = []

    async def other_holder() -> None:
        async with shared.b.hold("fx", 10) as held:
            seen.append(await held.load())

    async with anyio.create_task_group() as tg, shared.a.hold("fx", 10) as held:
        assert await held.load() == record(0)
        tg.start_soon(other_holder)
        await anyio.sleep(0.3)
        assert seen == [], "the other holder got in while the record was held"
        await held.save(record(1))
    assert seen == [record(1)]


async def lands_after_a_refresh(shared: SharedStore, write: Callable[[], Awaitable[object]]) -> None:
    """``write`` (to fx's record, from the other process) while the first holds fx's record and refreshes it: it
    waits, and lands after the refresh stored its tokens."""
    written = anyio.Event()

    async def other_write() -> None:
        await write()
        written.set()

    async with anyio.create_task_group() as tg, shared.a.hold("fx", 10) as held:
        tg.start_soon(other_write)
        await anyio.sleep(0.3)
        assert not written.is_set(), "a write landed while the record was held"
        await held.save(record(1))
    assert written.is_set()


@pytest.mark.parametrize("write", ["save", "forget"])
async def test_a_write_waits_for_the_hold_and_lands_after_it(shared: SharedStore, write: str) -> None:
    """`onetool auth` (save) or a logout (forget) while a refresh holds the record: theirs is the last word."""
    await shared.a.save("fx", record(0))
    await lands_after_a_refresh(
        shared, lambda: shared.b.save("fx", record(2)) if write == "save" else shared.b.forget("fx")
    )
    assert await shared.a.load("fx") == (record(2) if write == "save" else None)  # not the holder's


@pytest.mark.parametrize("shared", ["postgresql", "sqlite"], indirect=True)
async def test_a_server_removed_during_its_refresh_leaves_no_token_behind(shared: SharedStore) -> None:
    """Removing a server drops its OAuth record: after a refresh under way has stored its tokens, never before, or
    the refresh would store them again for a server that is gone."""
    assert isinstance(shared.b, StateTokenStore)
    await shared.b.state.add_server("fx", {"url": URL}, "cli")
    await shared.a.save("fx", record(0))
    await lands_after_a_refresh(shared, lambda: shared.b.state.remove_server("fx", "cli"))
    assert await shared.a.load("fx") is None


async def test_a_holder_waits_at_most_its_wait_then_fails_clearly(shared: SharedStore) -> None:
    await shared.a.save("fx", record(0))
    async with shared.a.hold("fx", 10):
        started = time.monotonic()
        with pytest.raises(StateError, match="OAuth record of 'fx'"):
            async with shared.b.hold("fx", 0.5):
                pytest.fail("held twice")
        assert 0.4 <= time.monotonic() - started < 5


async def test_the_wait_of_a_hold_is_its_own_not_the_stores(shared: SharedStore) -> None:
    """A refresh holds the record for a token request, longer than the store's usual transactions: a holder waits as
    long as it asked; the store's other writes go on waiting only their usual time."""
    await shared.a.save("fx", record(0))

    async def hold_for(seconds: float) -> None:
        async with shared.a.hold("fx", 10):
            await anyio.sleep(seconds)

    async with anyio.create_task_group() as tg:
        tg.start_soon(hold_for, STORE_TIMEOUT * 1.5)
        await anyio.sleep(0.1)
        async with shared.b.hold("fx", 10) as held:  # past the store's timeout: it would have failed
            assert await held.load() == record(0)

        tg.start_soon(hold_for, 10)
        await anyio.sleep(0.1)
        started = time.monotonic()
        with pytest.raises(StateError):
            await shared.b.save("fx", record(1))
        assert time.monotonic() - started < STORE_TIMEOUT * 4  # the store's timeout, not the last hold's 10 s
        tg.cancel_scope.cancel()


async def test_a_hold_keeps_only_its_own_record(shared: SharedStore) -> None:
    """A refresh of one server, however long its token request takes, holds back no other server's refresh and,
    on the state store, none of its other writes (on a SQLite file the hold is a lock file per server, not the
    database's write lock, which the store's other writes would wait for until their timeout, and fail)."""
    await shared.a.save("fx", record(0))
    async with shared.a.hold("fx", 10) as held:
        assert await held.load() == record(0)
        started = time.monotonic()
        await shared.b.save("other", record(5))
        async with shared.b.hold("other", 1) as other:
            assert await other.load() == record(5)
        if isinstance(shared.b, StateTokenStore):
            await shared.b.state.add_server("added", {"command": "true"}, "cli")
        assert time.monotonic() - started < STORE_TIMEOUT, "a write waited for another server's hold"
        await anyio.sleep(STORE_TIMEOUT * 1.5)  # a token request slower than the store's own waits
        await held.save(record(1))
    assert (await shared.b.load("fx"), await shared.b.load("other")) == (record(1), record(5))


async def test_a_holder_that_dies_releases_the_record(shared: SharedStore) -> None:
    """A replica killed mid-refresh: its connection (or file lock) goes with it, and the others get the record."""
    await shared.a.save("fx", record(0))
    script = str(FIXTURES / "hold_record.py")
    holder, line = start_and_read_line([sys.executable, script, shared.kind, shared.where, "fx"])
    try:
        assert line == "held"
        with pytest.raises(StateError):
            async with shared.b.hold("fx", 0.3):
                pytest.fail("held twice")
        holder.send_signal(signal.SIGKILL)
        started = time.monotonic()
        async with shared.b.hold("fx", 10) as held:
            assert await held.load() == record(0)
        assert time.monotonic() - started < 5
    finally:
        stop(holder, 1)


@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
async def test_a_failed_hold_writes_nothing_and_its_error_passes_through(
    kind: Kind, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    """On the state store what a hold's body raised is no failure of the store, and what it wrote is never stored
    (rolled back with PostgreSQL's transaction; on a SQLite file, kept for the end of the hold, which never came)."""
    async with await StateStore.open(state_url(kind, request, tmp_path)) as state:
        await state.save_oauth_record("fx", "before")

        class Boom(Exception):
            pass

        with pytest.raises(Boom):
            async with state.held_oauth_record("fx", 1) as held:
                await held.write("during")
                assert await held.read() == "during"
                raise Boom
        assert await state.oauth_record("fx") == "before"
