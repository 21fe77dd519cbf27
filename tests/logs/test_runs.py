"""The recent runs the console lists: each run's mark, and the runs after a mark, so a live list misses none."""

from __future__ import annotations

from datetime import UTC, datetime

import anyio
import pytest

from onetool.logs.runs import Mark, RunLog, RunRecord

pytestmark = pytest.mark.anyio


def record(code: str) -> RunRecord:
    return RunRecord(code, datetime.now(UTC), "run", 0.01, 0, "SUCCESS", None, None, None, code)


def test_the_runs_after_a_mark_are_those_added_since_oldest_first() -> None:
    log = RunLog(size=3)
    start = log.last()
    assert start.seq == 0 and log.since(start) == []
    for code in "abcd":
        log.add(record(code))
    # Only the last three are kept: a list that fell further behind gets what is left.
    assert [r.code for r in log.since(start)] == ["b", "c", "d"]
    [c] = [r for r in log.recent() if r.code == "c"]
    assert c.mark is not None and [r.code for r in log.since(c.mark)] == ["d"]
    assert log.since(log.last()) == []
    assert Mark.parse(str(c.mark)) == c.mark


def test_a_mark_of_another_gateway_asks_for_every_run_kept() -> None:
    """After a restart the log's epoch is new: a browser's mark from before counts nothing as seen."""
    before, after = RunLog(), RunLog()
    for code in "ab":
        before.add(record(code))
    after.add(record("c"))
    assert [r.code for r in after.since(before.last())] == ["c"]


@pytest.mark.parametrize("text", [None, "", "-", "abc", "abc-", "-12", "ab c-1", "a-1-2", "a-" + "9" * 80, "é-1"])
def test_text_that_is_no_mark_is_read_as_none(text: str | None) -> None:
    assert Mark.parse(text) is None


async def test_followers_are_cued_however_many_runs_end_before_they_read() -> None:
    log = RunLog()
    async with log.follow() as ended:
        for code in "abc":
            log.add(record(code))
        with anyio.fail_after(1):
            await ended.receive()
        assert [r.code for r in log.since(Mark(log.last().epoch, 0))] == ["a", "b", "c"]
