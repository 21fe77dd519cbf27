"""The servers page's last hour of upstream calls: counts, nearest-rank p50/p95, the last error, a bounded memory."""

from __future__ import annotations

import pytest

from onetool.metrics import RECENT_CALLS, CallWindow
from tests.upstream.conftest import fault, open_pool, wait_for_status


def test_the_window_counts_calls_and_errors_and_ranks_latencies() -> None:
    window = CallWindow()
    for ms in range(1, 101):
        window.add("a", ms / 1000, None if ms % 10 else f"call {ms} failed\u202e")
    summary = window.summary("a")
    assert (summary.calls, summary.errors, summary.p50, summary.p95) == (100, 10, 0.05, 0.095)
    assert summary.last_error == "call 100 failed<U+202E RIGHT-TO-LEFT OVERRIDE>"
    assert (window.summary("b").calls, window.summary("b").p50) == (0, None)


def test_a_flood_of_calls_keeps_only_the_newest_and_old_calls_expire() -> None:
    window = CallWindow(per_server=10)
    for _ in range(1000):
        window.add("a", 1.0, None)
    assert window.summary("a").calls == 10
    expired = CallWindow(seconds=-1.0)  # every call is older than the window at once
    expired.add("a", 1.0, "boom")
    assert expired.summary("a").calls == 0
    assert expired.summary("a").last_error == "boom"


@pytest.mark.anyio
async def test_a_server_removed_from_the_pool_leaves_no_window_behind() -> None:
    """Servers added and removed by the hundred (a model through /mcp/direct) must not pile up windows."""
    async with open_pool({"gone": fault(), "kept": fault()}) as pool:
        await wait_for_status(pool, "gone", "connected")
        await wait_for_status(pool, "kept", "connected")
        for server in ("gone", "kept"):
            await pool.call(server, "echo", {"message": "x"})
            assert RECENT_CALLS.summary(server).calls >= 1
        await pool.remove("gone")
        assert "gone" not in RECENT_CALLS._calls and RECENT_CALLS.summary("gone").calls == 0
        assert RECENT_CALLS.summary("kept").calls >= 1
