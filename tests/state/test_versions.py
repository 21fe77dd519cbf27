"""Writes from two stores on one database (two replicas): a version per server's overrides, upserts, the change
counter and, on PostgreSQL, a notification per change. A write that lost a race changes nothing and audits nothing.
"""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from onetool.errors import LostRace, ServerExists
from onetool.state import StateStore


async def test_concurrent_writes_over_one_version_apply_once_and_audit_once(store_url: str) -> None:
    async with await StateStore.open(store_url) as a, await StateStore.open(store_url) as b:
        before = await a.change_counter()
        outcomes: list[object] = []

        async def write(store: StateStore, quarantined: bool) -> None:
            try:
                outcomes.append(await store.set_quarantined("wix", quarantined, "api", expected=0))
            except LostRace as e:
                outcomes.append(e)

        async with anyio.create_task_group() as tg:
            tg.start_soon(write, a, True)
            tg.start_soon(write, b, False)
        lost = [o for o in outcomes if isinstance(o, LostRace)]
        assert len(lost) == 1, outcomes
        assert "changed meanwhile" in str(lost[0]) and "version 1" in str(lost[0])
        override = (await b.overrides())["wix"]
        assert override.version == 1
        assert [e.action for e in await a.audit_log(server="wix")] == ["set_quarantined"]
        assert await b.change_counter() == before + 1

        # over the version it knows, a write applies and bumps it; over an older one it is refused
        again = await a.set_quarantined("wix", False, "api", expected=1)
        assert again.version == 2 and again.quarantined is False
        with pytest.raises(LostRace):
            await b.set_enabled("wix", False, "api", expected=1)
        assert (await a.overrides())["wix"].enabled is None
        assert len(await a.audit_log(server="wix")) == 2


async def test_a_concurrent_add_of_one_name_is_server_exists_never_a_duplicate_key(store_url: str) -> None:
    async with await StateStore.open(store_url) as a, await StateStore.open(store_url) as b:
        errors: list[BaseException] = []

        async def add(store: StateStore) -> None:
            try:
                await store.add_server("new", {"url": "http://127.0.0.1:9/mcp"}, "api")
            except ServerExists as e:
                errors.append(e)

        async with anyio.create_task_group() as tg:
            tg.start_soon(add, a)
            tg.start_soon(add, b)
        assert len(errors) == 1
        assert [e.action for e in await a.audit_log(server="new")] == ["add_server"]
        snapshot = await b.snapshot()
        assert list(snapshot.added) == ["new"] and snapshot.counter == await a.change_counter()


@pytest.mark.parametrize("new_store_url", ["postgresql"], indirect=True)
async def test_postgresql_notifies_every_listener_of_a_change(store_url: str) -> None:
    async with await StateStore.open(store_url) as a, await StateStore.open(store_url) as b:
        woken = anyio.Event()
        async with b.notifications(woken.set) as listening:
            assert listening is not None and listening()
            await a.set_enabled("wix", False, "cli")
            with anyio.fail_after(2):
                await woken.wait()


async def test_sqlite_has_no_notifications_only_the_counter(tmp_path: Path) -> None:
    async with await StateStore.open(f"sqlite+aiosqlite:///{tmp_path}/s/onetool.db") as store:
        async with store.notifications(lambda: None) as listening:
            assert listening is None
        await store.set_enabled("wix", False, "cli")
        await store.record("restart_server", "cli", "wix")  # an audit entry only: nothing served changed
        assert await store.change_counter() == 1
