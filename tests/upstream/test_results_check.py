"""An upstream's structured results are checked against its output schemas within bounds (onetool/upstream/_results.py),
in place of the SDK's unbounded check on the event loop; through a real pool the checked results still arrive."""

from __future__ import annotations

import pytest
from mcp import types
from mcp.client.session import ClientSession

from onetool.schemas.validation import MAX_VALUES
from onetool.upstream._results import ResultCheck
from tests.upstream.conftest import fault, open_pool

pytestmark = pytest.mark.anyio

NUMBERS = {"type": "object", "properties": {"result": {"type": "array", "items": {"type": "integer"}}}}


def tool(schema: dict | None) -> types.Tool:
    return types.Tool(name="numbers", input_schema={"type": "object"}, output_schema=schema)


def result(structured: object, **extra: object) -> types.CallToolResult:
    return types.CallToolResult(content=[], structured_content=structured, **extra)


async def test_a_result_that_breaks_its_output_schema_is_refused() -> None:
    check = ResultCheck(lambda: [tool(NUMBERS)])
    await check("numbers", result({"result": [1, 2]}))
    with pytest.raises(RuntimeError) as info:
        await check("numbers", result({"result": [1, "two"]}))
    assert (
        str(info.value)
        == 'Invalid structured content returned by tool numbers: result.1: "two" is not of type "integer"'
    )
    with pytest.raises(RuntimeError, match="has an output schema but did not return structured content"):
        await check("numbers", types.CallToolResult(content=[]))


async def test_a_result_past_the_bound_is_passed_on_unchecked_and_others_are_not_checked() -> None:
    check = ResultCheck(lambda: [tool(NUMBERS)])
    await check("numbers", result({"result": ["not a number"] * MAX_VALUES}))
    await check("unlisted", result({"anything": True}))
    await ResultCheck(lambda: [tool(None)])("numbers", result({"result": "free"}))


async def test_a_changed_output_schema_is_compiled_again() -> None:
    catalogue = [tool(NUMBERS)]
    check = ResultCheck(lambda: catalogue)
    await check("numbers", result({"result": [1]}))
    catalogue[0] = tool({"type": "object", "properties": {"result": {"type": "array", "items": {"type": "string"}}}})
    with pytest.raises(RuntimeError, match='1 is not of type "string"'):
        await check("numbers", result({"result": [1]}))


async def test_a_pools_structured_results_are_checked_by_the_gateway_not_the_sdk(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def unbounded(*args: object) -> None:
        raise AssertionError("the SDK's own check of a structured result ran")

    monkeypatch.setattr(ClientSession, "_output_schema_validator", unbounded)
    async with open_pool({"fx": fault("ok")}) as pool:
        got = await pool.call("fx", "numbers", {"n": 3})
    assert not got.is_error and got.structured_content == {"result": [0, 1, 2]}
