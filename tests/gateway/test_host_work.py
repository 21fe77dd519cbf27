"""What a run makes the host do is bounded and charged to the run: the host never parses snippet code (the
worker does, under the run's limits), and checks of a call's arguments cost a constant, not the snippet's data."""

from __future__ import annotations

import ast
from typing import Any
from unittest import mock

import pytest

from onetool.core.gateway import Gateway
from onetool.registry._tools import MAX_LOCAL_VALUES
from tests.conftest import spans
from tests.gateway.test_gateway import make_config
from tests.gateways import text_of

pytestmark = pytest.mark.anyio


async def test_the_host_never_parses_snippet_code_and_still_reports_before_running(
    log_records: list[dict[str, Any]],
) -> None:
    async with Gateway(make_config()) as gw:
        with mock.patch.object(ast, "parse", side_effect=AssertionError("the host parsed snippet code")):
            unknown = await gw.run("x = 1\nprint('side effect')\ntime.get_current_tim(timezone='UTC')")
            shape = await gw.run("print('side effect')\nif True:\n    time.get_current_time(zone='UTC')")
            syntax = await gw.run("x = (1,\n")
            hidden = await gw.run("time.get_current_time(**{'timezone': 'UTC'})['timezone']")
            fine = await gw.run("time.get_current_time(timezone='UTC')['timezone']")
    assert unknown.is_error and unknown.structured_content is not None
    assert unknown.structured_content["error"]["type"] == "UnknownTool"
    assert unknown.structured_content["error"]["line"] == 3 and "did you mean get_current_time?" in text_of(unknown)
    assert "side effect" not in text_of(unknown)
    assert shape.is_error and "unknown argument 'zone'" in text_of(shape) and "side effect" not in text_of(shape)
    assert shape.structured_content is not None and shape.structured_content["error"]["line"] == 3
    assert syntax.is_error and syntax.structured_content is not None
    assert syntax.structured_content["error"]["type"] == "SyntaxError" and syntax.structured_content["error"]["line"]
    assert not hidden.is_error and not fine.is_error, text_of(fine)
    assert fine.structured_content == {"result": "UTC"}
    # The caller's mistakes are neither the host's faults nor the code's exceptions: nothing ran.
    assert [r.structured_content["error"]["origin"] for r in (unknown, shape, syntax)] == ["precheck"] * 2 + ["code"]
    assert text_of(unknown).startswith("[pre-check: nothing ran] UnknownTool: ")
    assert text_of(shape).startswith("[pre-check: nothing ran] ArgumentError: ")
    origins = [run.get("errorOrigin") for run in spans(log_records, "run")]
    assert origins == ["precheck", "precheck", "code", None, None]


async def test_a_local_tools_arguments_are_checked_only_within_a_bound() -> None:
    async with Gateway(make_config()) as gw:
        big = await gw.run(f"brave.echo(message=['x'] * {MAX_LOCAL_VALUES + 1})")
        small = await gw.run("brave.echo(message='hi')")
    assert big.is_error and f"more than {MAX_LOCAL_VALUES:,} values" in text_of(big)
    assert text_of(small) == "local echo: hi"
