"""The one call path (onetool.core.calls), in-process through a real Gateway: what reaches the snippet and the log when
a local pack has a bug, and the one record per MCP request every face writes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mcp import Client

from onetool.config import Config
from onetool.core.gateway import Gateway
from onetool.serve.run import build_run_server
from tests.conftest import spans
from tests.gateways import text_of

BUGGY_PACK = '''
def divide(a: int, b: int) -> float:
    """a / b, with no care for b == 0."""
    return a / b
'''


def config(tmp_path: Path) -> Config:
    (tmp_path / "packs").mkdir()
    (tmp_path / "packs" / "calc.py").write_text(BUGGY_PACK)
    return Config.model_validate({"packs": {"dirs": [str(tmp_path / "packs")]}, "sandbox": {"timeout": 10}})


async def test_a_local_pack_bug_is_a_tool_error_for_the_snippet_and_a_traceback_in_the_log(
    tmp_path: Path, log_records: list[dict[str, Any]]
) -> None:
    async with Gateway(config(tmp_path), warm_workers=1) as gateway:
        result = await gateway.run(
            "try:\n    calc.divide(a=1, b=0)\nexcept ToolError as e:\n    caught = str(e)\ncaught"
        )
    assert not result.is_error, text_of(result)
    assert text_of(result) == "calc.divide raised ZeroDivisionError: division by zero"
    bug = [r for r in log_records if r["message"] == "local pack calc.divide raised"]
    assert len(bug) == 1 and bug[0]["traced"] and bug[0]["level"] == "WARNING"


async def test_every_mcp_request_is_one_record_with_method_tool_duration_and_outcome(
    tmp_path: Path, log_records: list[dict[str, Any]]
) -> None:
    async with (
        Gateway(config(tmp_path), warm_workers=1) as gateway,
        Client(build_run_server(gateway), mode="legacy") as client,
    ):
        await client.list_tools()
        ok = await client.call_tool("run", {"code": "calc.divide(a=6, b=3)"})
        failed = await client.call_tool("run", {"code": "calc.divide(a=1, b=0)"})
    assert (text_of(ok), failed.is_error) == ("2.0", True)
    requests = [r for r in log_records if r["extra"].get("span") == "mcp.request"]
    seen = [(r["level"], r["extra"]["method"], r["extra"].get("tool"), r["extra"]["outcome"]) for r in requests]
    assert ("INFO", "initialize", None, "ok") in seen and ("INFO", "tools/list", None, "ok") in seen
    assert {r["extra"]["face"] for r in requests} == {"run"}
    calls = [s for s in seen if s[1] == "tools/call"]
    assert calls == [("INFO", "tools/call", "run", "ok"), ("INFO", "tools/call", "run", "error")]
    assert all(r["extra"]["status"] == "SUCCESS" and r["extra"]["duration"] >= 0 for r in requests)
    # The failed run has its own FAILED record; the request that carried it succeeded.
    assert [s["status"] for s in spans(log_records, "run")] == ["SUCCESS", "FAILED"]
