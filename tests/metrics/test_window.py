"""The servers page's last hour of upstream calls: counts, nearest-rank p50/p95, the last error, a bounded memory."""

from __future__ import annotations

from onetool.metrics import CallWindow


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
