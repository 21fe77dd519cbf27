"""LogSpan: one structured record per block, with status, duration and error fields."""

from __future__ import annotations

import pytest

from onetool.logs import LogSpan
from tests.conftest import spans


def test_success_record(log_records: list) -> None:
    with LogSpan("proxy.connect", server="a") as span:
        span.add(toolCount=3)
    (record,) = spans(log_records, "proxy.connect")
    assert record["status"] == "SUCCESS"
    assert record["server"] == "a" and record["toolCount"] == 3
    assert record["duration"] >= 0
    assert "errorType" not in record


def test_failure_record(log_records: list) -> None:
    with pytest.raises(ValueError), LogSpan("proxy.tool.call", server="a", tool="t"):
        raise ValueError("bad input")
    (record,) = spans(log_records, "proxy.tool.call")
    assert record["status"] == "FAILED"
    assert record["errorType"] == "ValueError" and record["errorMessage"] == "bad input"
    assert [r["level"] for r in log_records if r["extra"].get("span")] == ["WARNING"]


def test_failure_without_exception(log_records: list) -> None:
    with LogSpan("run") as span:
        span.add(status="FAILED", errorType="ToolError", errorMessage="nope")
    (record,) = spans(log_records, "run")
    assert record["status"] == "FAILED" and record["errorType"] == "ToolError"
