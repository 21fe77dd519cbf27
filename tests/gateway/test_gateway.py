"""The Gateway in-process: run ids across spans, limits, the run description."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from onetool.config import Config
from onetool.core.describe import BUDGET_BYTES, describe_run
from onetool.core.gateway import Gateway
from onetool.core.listing import json_size
from tests.conftest import FIXTURES, PYTHON, spans
from tests.gateways import gateway_config, text_of

pytestmark = pytest.mark.anyio


def make_config(**sandbox: Any) -> Config:
    raw = gateway_config(f"inproc-{uuid.uuid4().hex}", **sandbox)
    del raw["servers"]["broken-server"]
    return Config.model_validate(raw)


async def test_run_span_and_tool_call_spans_share_the_run_id(log_records: list) -> None:
    async with Gateway(make_config()) as gw:
        result = await gw.run(
            "a = time.get_current_time(timezone='UTC')\nb = brave.get_sum(a=1, b=2)\n[a['timezone'], b]"
        )
        assert not result.is_error, text_of(result)
        failed = await gw.run("brave.get_sum(a=1, b=2)\n1/0")
        assert failed.is_error
    runs = spans(log_records, "run")
    calls = spans(log_records, "proxy.tool.call")
    assert [r["status"] for r in runs] == ["SUCCESS", "FAILED"]
    assert runs[0]["calls"] == 2 and runs[1]["calls"] == 1
    assert runs[1]["errorType"] == "ZeroDivisionError"
    assert runs[0]["runId"] != runs[1]["runId"]
    assert [c["runId"] for c in calls] == [runs[0]["runId"], runs[0]["runId"], runs[1]["runId"]]
    assert {c["server"] for c in calls} == {"time", "brave"}
    init = spans(log_records, "proxy.init")
    assert init and init[0]["serverCount"] == 3 and init[0]["connected"] == 3


async def test_run_timeout_kills_the_run_and_the_next_run_works() -> None:
    async with Gateway(make_config(timeout=1)) as gw:
        result = await gw.run("while True:\n    pass")
        assert result.is_error and "TimeoutError" in text_of(result)
        assert text_of(await gw.run("1 + 1")) == "2"


async def test_hostile_code_gets_an_error_not_a_file() -> None:
    async with Gateway(make_config()) as gw:
        for code in ("open('/etc/passwd').read()", "__import__('os').environ", "().__class__.__mro__"):
            result = await gw.run(code)
            assert result.is_error, code
            assert "root:" not in text_of(result)


async def test_description_lists_every_pack() -> None:
    async with Gateway(make_config()) as gw:
        text = gw.describe_run()
        # The same catalogue given room: each pack in the compact form, down to its tools' purposes.
        roomy = describe_run(gw.registry, gw.limits, budget=20_000)
    assert text.startswith("Run Python that calls tools as `pack.tool(arg=value)`.")
    assert json_size(text) <= BUDGET_BYTES and 'proxy.search("what you need")' in text
    for pack in ("time", "brave", "broken_helper", "fx", "proxy"):
        assert f"\n{pack}:" in text
    for line in (
        "\ntime:\n  get_current_time(timezone: str) -> {timezone: str, datetime: str, ",
        "\n  echo(message: str) # Local echo: wins over the upstream tool of the same name.\n",
        "\n  list_servers() # Every server and its live status.\n",
        "\nbroken_helper:\n  divide(a: float, b: float) # a / b.\n",
    ):
        assert line in roomy, roomy
    assert "off: [server disabled" in text
    assert "Shortened to fit" in text and "Shortened to fit" not in roomy


async def test_a_pack_whose_name_starts_with_a_digit_is_callable() -> None:
    """`123server` becomes pack `_123server` (gateway-server-spec); registered pack names are never private."""
    config = Config.model_validate(
        {"servers": {"123server": {"command": PYTHON, "args": [str(FIXTURES / "fault_server.py"), "ok"]}}}
    )
    async with Gateway(config) as gw:
        result = await gw.run("_123server.echo(message='hi')")
        assert not result.is_error, text_of(result)
        assert text_of(result) == "echo: hi"
        # Only the registered name is let through: other private names stay private.
        refused = await gw.run("[_124server]")
        assert refused.is_error and "private" in text_of(refused)


async def test_a_call_refused_for_a_down_server_still_logs_its_failed_call(log_records: list) -> None:
    async with Gateway(make_config()) as gw:
        code = "try:\n    off.anything(x=1)\nexcept ToolUnavailable as e:\n    r = 'caught'\nr"
        result = await gw.run(code)
    assert text_of(result) == "caught"
    [call] = spans(log_records, "proxy.tool.call")
    assert call["status"] == "FAILED" and call["server"] == "off" and call["tool"] == "anything"
    assert call["errorType"] == "UpstreamUnavailable" and "server 'off' is unavailable" in call["errorMessage"]
    assert [r["status"] for r in spans(log_records, "run")] == ["SUCCESS"]


async def test_a_caught_tool_error_names_its_server_and_tool_and_whose_failure_it_was() -> None:
    """``e.server`` (the configured server; None for a local tool), ``e.tool`` (as the snippet called it) and
    ``e.origin``: "tool" when the tool failed, "host" when OneTool decided, "code" for the snippet's own."""
    catch = "try:\n    {}\nexcept ToolError as e:\n    r = [type(e).__name__, e.server, e.tool, e.origin]\nr"
    cases = {
        "fx.fail(message='no')": ["ToolError", "fx", "fail", "tool"],  # the server's JSON-RPC error
        "time.get_current_time(timezone='Nowhere/Atlantis')": ["ToolError", "time", "get_current_time", "tool"],
        "getattr(time, 'nope')()": ["UnknownTool", "time", "nope", "host"],
        "time.get_current_time(**{'zone': 'UTC'})": ["ArgumentError", "time", "get_current_time", "host"],
        "brave.echo(message=['x'])": ["ArgumentError", None, "echo", "host"],  # the local tool over the server's
        "raise ToolError('mine')": ["ToolError", None, None, "code"],
    }
    async with Gateway(make_config()) as gw:
        for call, expected in cases.items():
            result = await gw.run(catch.format(call))
            assert result.structured_content == {"result": expected}, (call, text_of(result))
        batch = await gw.run(
            "r = parallel(lambda: fx.fail(message='no'), lambda: fx.echo(message='hi'), return_exceptions=True)\n"
            "[r[0].server, r[0].tool, r[0].origin, str(r[0]).startswith('fx.fail failed'), r[1]]"
        )
    assert batch.structured_content == {"result": ["fx", "fail", "tool", True, "echo: hi"]}, text_of(batch)
