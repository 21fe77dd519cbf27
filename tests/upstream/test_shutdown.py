"""Shutdown and process hygiene: every child and its group gone, no zombies, within 5 s."""

from __future__ import annotations

import os
import signal
import time
from typing import Any

import anyio
import pytest

from onetool.errors import UpstreamUnavailable
from tests.conftest import spans
from tests.upstream.conftest import (
    children,
    fault,
    group_members,
    live_group_members,
    open_pool,
    upstream_groups,
    wait_for_status,
)


def _zombies() -> list[int]:
    return [pid for pid, (state, _pgrp) in children().items() if state == "Z"]


async def test_shutdown_kills_stubborn_children_and_their_groups(everything_stdio: dict[str, Any]) -> None:
    before = upstream_groups()
    servers = {"stubborn": fault("stubborn"), "everything": everything_stdio, "fx": fault("ok")}
    async with open_pool(servers) as pool:
        assert {s.status for s in pool.status()} == {"connected"}
        groups = upstream_groups() - before
        assert len(groups) == 3
        # The stubborn server's grandchild is in its group too.
        assert len(group_members(groups)) >= 4
        started = time.monotonic()
    assert time.monotonic() - started < 5
    assert live_group_members(groups) == []
    assert _zombies() == []


async def test_twenty_crash_reconnect_cycles_leave_nothing_behind(
    everything_stdio: dict[str, Any], log_records: list[dict[str, Any]]
) -> None:
    before = upstream_groups()
    seen: set[int] = set()
    # Every session here is killed right after it connects: counted as stable, so reconnects stay quick (a crash
    # loop's growing backoff is test_recovery's).
    async with open_pool({"everything": everything_stdio}, stable_after=0) as pool:
        for _ in range(20):
            (leader,) = upstream_groups() - before
            seen.add(leader)
            os.killpg(leader, signal.SIGKILL)
            with anyio.fail_after(10):
                while (current := upstream_groups() - before) in (set(), {leader}) or (
                    pool.server_status("everything").status != "connected"
                ):
                    await anyio.sleep(0.02)
            assert len(current) == 1
        assert (await pool.call("everything", "echo", {"message": "alive"})).content[0].text == "Echo: alive"
        assert _zombies() == []
        assert live_group_members(seen) == []
        seen |= upstream_groups() - before
    assert len(seen) == 21
    assert live_group_members(seen) == [] and _zombies() == []
    assert len([c for c in spans(log_records, "proxy.connect") if c["status"] == "SUCCESS"]) == 21


async def test_crash_loop_of_a_python_server_then_shutdown() -> None:
    before = upstream_groups()
    seen: set[int] = set()
    async with open_pool({"fx": fault("crash")}) as pool:
        for _ in range(3):
            seen |= upstream_groups() - before
            with pytest.raises(UpstreamUnavailable):
                await pool.call("fx", "crash", {})
            await wait_for_status(pool, "fx", "connected")
        seen |= upstream_groups() - before
    assert len(seen) == 4
    assert live_group_members(seen) == [] and _zombies() == []
