"""progress(): the snippet's reports reach on_progress checked, cut to one short line and rate-limited; what a
worker past the language layer sends is checked on the host, and a flood ends the run."""

from __future__ import annotations

import time
from typing import Any

import pytest

from sandbox import Limits, Sandbox
from sandbox.host._untrusted import decode_untrusted
from sandbox.protocol.caps import MAX_PROGRESS_MESSAGE, PROGRESS_RATE
from sandbox.protocol.channel import ProtocolError
from sandbox.protocol.messages import Progress, parse
from tests.sandbox.conftest import PACKS, make_on_call
from tests.sandbox.hostile_worker import run_hostile

pytestmark = pytest.mark.anyio

Report = tuple[float, float | None, str | None]


async def run(sandbox: Sandbox, code: str) -> tuple[Any, list[Report]]:
    reports: list[Report] = []
    result = await sandbox.run(
        code, packs=PACKS, on_call=make_on_call(), on_progress=lambda *r: reports.append(r), limits=Limits(timeout=5)
    )
    return result, reports


async def test_reports_arrive_as_numbers_and_one_short_line(sandbox: Sandbox) -> None:
    code = "progress(1, 4, 'first\\nline\\x1b[31m' + 'x' * 500)\n'ok'"
    result, reports = await run(sandbox, code)
    assert result.value == "ok", result.error
    [(done, total, message)] = reports
    assert (done, total) == (1.0, 4.0)
    assert message is not None and message.startswith("first line [31mxxx") and len(message) == MAX_PROGRESS_MESSAGE


async def test_a_fast_loop_is_thinned_to_the_rate(sandbox: Sandbox) -> None:
    started = time.monotonic()
    result, reports = await run(sandbox, "for i in range(200_000):\n    progress(i, 200_000)\n'ok'")
    elapsed = time.monotonic() - started
    assert result.value == "ok", result.error
    assert 1 <= len(reports) <= PROGRESS_RATE * elapsed + PROGRESS_RATE
    assert [r[0] for r in reports] == sorted(r[0] for r in reports)


@pytest.mark.parametrize(
    ("code", "kind", "message"),
    [
        ("progress(float('nan'))", "ValueError", "finite"),
        ("progress(1, float('inf'))", "ValueError", "finite"),
        ("progress(10**400)", "ValueError", "at most 9007199254740992 in magnitude"),
        ("progress(2**53 + 1, 2**60)", "ValueError", "at most 9007199254740992 in magnitude"),
        ("progress(True)", "TypeError", "must be a number, not bool"),
        ("progress('3')", "TypeError", "must be a number, not str"),
        ("progress(1, message=3)", "TypeError", "message must be a str"),
    ],
)
async def test_bad_values_are_the_snippets_error(sandbox: Sandbox, code: str, kind: str, message: str) -> None:
    result, reports = await run(sandbox, code)
    assert result.error is not None and result.error.type == kind, result
    assert message in result.error.message
    assert reports == []


@pytest.mark.parametrize(
    "frame",
    [
        {"op": "progress", "done": True, "total": None, "message": None},
        {"op": "progress", "done": "nan", "total": None, "message": None},
        {"op": "progress", "done": 1, "total": [2], "message": None},
        {"op": "progress", "done": 2**60, "total": None, "message": None},
        {"op": "progress", "done": 1, "total": None, "message": {"x": 1}},
        {"op": "progress", "done": 1, "total": None},
        {"op": "progress", "done": 1, "total": None, "message": None, "extra": 1},
    ],
    ids=["bool", "nan", "list-total", "huge-int", "dict-message", "missing-key", "extra-key"],
)
def test_the_host_refuses_a_malformed_progress_frame(frame: dict[str, Any]) -> None:
    with pytest.raises(ProtocolError, match="not a progress message"):
        parse(frame, Limits())


def test_the_host_cuts_and_cleans_what_a_worker_says() -> None:
    body = b'{"op":"progress","done":1,"total":2.5,"message":"a\\ud800\\n\\u2028b' + b"c" * 10_000 + b'"}'
    report = parse(decode_untrusted(body), Limits())
    assert isinstance(report, Progress) and (report.done, report.total) == (1.0, 2.5)
    assert report.message is not None and report.message.startswith("a\ufffd b") and len(report.message) == 200


async def test_a_hostile_flood_of_reports_ends_the_run(hostile: Sandbox) -> None:
    frame = b'{"op":"progress","done":1,"total":null,"message":"flood"}'
    reports: list[Report] = []
    result = await run_hostile(
        hostile, f"for i in range(100_000):\n    send({frame!r})", on_progress=lambda *r: reports.append(r)
    )
    assert result.error is not None and result.error.type == "LimitError", result
    assert "progress reports far faster" in result.error.message
    assert PROGRESS_RATE <= len(reports) < 3 * PROGRESS_RATE
