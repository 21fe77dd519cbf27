"""The control plane follows its store: a change written by another process is applied on the next reconcile,
and while the store cannot be read no upstream server is shown (its quarantine may have changed meanwhile)."""

from __future__ import annotations

import uuid
from pathlib import Path

import anyio
import pytest

from onetool.config import Config
from onetool.config.served import Served
from onetool.control._server import ServerControl
from onetool.state import StateStore
from onetool.upstream import UpstreamPool
from tests.conftest import TIME_SERVER
from tests.postgres import create_database
from tests.state.conftest import hold_lock, release

pytestmark = pytest.mark.anyio


async def test_a_store_that_cannot_be_read_hides_every_server_until_it_can(tmp_path: Path) -> None:
    file = tmp_path / "onetool.db"
    config = Config.model_validate({"servers": {"time": {"command": TIME_SERVER, "args": ["--local-timezone", "UTC"]}}})
    async with await StateStore.open(f"sqlite:///{file}", timeout=0.3) as store:
        control = await ServerControl.load(Served(config), store)
        async with UpstreamPool(control.configs()) as pool:
            with anyio.fail_after(30):
                while not pool.server_status("time").connected:
                    await anyio.sleep(0.05)
            changes: list[None] = []
            await control.attach(pool, lambda: changes.append(None))
            assert control.shown("time")

            # another process quarantines it, behind this gateway's back: applied on the next reconcile
            async with await StateStore.open(f"sqlite:///{file}") as other:
                await other.set_quarantined("time", True, "cli")
            await control.reconcile()
            assert control.shown("time") is None and changes

            async with await StateStore.open(f"sqlite:///{file}") as other:
                await other.set_quarantined("time", False, "cli")
            locker = hold_lock(file, "EXCLUSIVE")  # no one may even read it now
            try:
                changes.clear()
                await control.reconcile()
                assert control.blind and control.shown("time") is None and changes
            finally:
                release(locker)
            await control.reconcile()
            assert not control.blind and control.shown("time") == pool.tools("time")


async def test_on_postgresql_every_notification_wakes_the_follower(postgres: str) -> None:
    """With the counter read only once a minute, each change still arrives at once: notified, not polled."""
    store_url = create_database(postgres, f"follow_{uuid.uuid4().hex[:12]}")
    async with await StateStore.open(store_url) as store, await StateStore.open(store_url) as other:
        control = await ServerControl.load(Served(Config.model_validate({})), store)
        async with UpstreamPool(control.configs()) as pool, anyio.create_task_group() as tg:
            await control.attach(pool, lambda: None)
            tg.start_soon(control.follow, 60.0)
            await anyio.sleep(0.5)  # listening
            for name in ("one", "two", "three"):
                await other.add_server(name, {"command": "node", "enabled": False}, "cli")
                with anyio.fail_after(5):
                    while name not in [view.name for view in control.list()]:
                        await anyio.sleep(0.02)
            tg.cancel_scope.cancel()
