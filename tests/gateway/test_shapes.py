"""What a model reads about real servers through `onetool serve`: shapes in, shapes out, limits, within budget."""

from __future__ import annotations

import pytest
from mcp import Client

from onetool.core.describe import BUDGET_BYTES
from onetool.core.listing import json_size
from tests.gateways import ServedGateway, text_of

pytestmark = pytest.mark.anyio

TIME_RESULT = "{timezone: str, datetime: str, day_of_week: str, is_dst: bool}"


async def run_description(gateway: ServedGateway) -> str:
    async with Client(gateway.url, read_timeout_seconds=60) as client:
        (tool,) = (await client.list_tools()).tools
    assert tool.description is not None
    return tool.description


async def test_proxy_describe_shows_real_servers_shapes(gateway: ServedGateway) -> None:
    names = ["time.get_current_time", "time.convert_time", "brave.get_structured_content", "brave.get_sum", "fx.add"]
    result = await gateway.run(f"[proxy.describe(t)['signature'] for t in {names!r}] + [proxy.describe('fx.count')]")
    assert not result.is_error, text_of(result)
    *signatures, count = result.structured_content["result"]
    assert signatures == [
        # mcp-server-time: the return shape from its outputSchema, a $ref into $defs resolved inline
        f"time.get_current_time(timezone: str) -> {TIME_RESULT}",
        f"time.convert_time(source_timezone: str, time: str, target_timezone: str) -> {{source: {TIME_RESULT}, "
        f"target: {TIME_RESULT}, time_difference: str}}",
        # server-everything: an enum in, a structured result out
        "brave.get_structured_content(location: Literal['New York', 'Chicago', 'Los Angeles']) -> "
        "{temperature: float, conditions: str, humidity: float}",
        "brave.get_sum(a: float, b: float)",
        # a Python-SDK server returning an int: the {"result": X} envelope is unwrapped, as results are
        "fx.add(a: int, b: int) -> int",
    ]
    assert count["signature"] == "fx.count(items: list[str]) -> int"
    assert count["parameters"] == [{"name": "items", "type": "list[str]", "required": True}]


async def test_description_gives_limits_and_fits_the_budget(gateway: ServedGateway) -> None:
    text = await run_description(gateway)
    assert json_size(text) <= BUDGET_BYTES
    assert "Limits per run: 5 s, 200 calls, output cut at 40,000 characters." in text  # its sandbox.timeout
    assert "reported before anything runs" in text


async def test_results_have_the_shapes_the_description_states(gateway: ServedGateway) -> None:
    result = await gateway.run(
        "t = time.get_current_time(timezone='UTC')\n"
        "c = time.convert_time(source_timezone='UTC', time='12:00', target_timezone='Asia/Tokyo')\n"
        "[sorted(t), t['is_dst'], sorted(c), c['target']['timezone'], fx.add(2, 3)]"
    )
    assert not result.is_error, text_of(result)
    assert result.structured_content["result"] == [
        ["datetime", "day_of_week", "is_dst", "timezone"],
        False,
        ["source", "target", "time_difference"],
        "Asia/Tokyo",
        5,
    ]
