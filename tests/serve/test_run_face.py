"""The `run` tool itself, in-process, in both protocol eras."""

from __future__ import annotations

import pytest
from mcp import Client
from mcp.types import TextContent

from onetool.serve import RUN_INPUT_SCHEMA, build_run_server
from tests.serve.fake_gateway import FakeGateway

MODES = ["auto", "legacy"]


def text(result) -> str:
    return "\n".join(c.text for c in result.content if isinstance(c, TextContent))


@pytest.mark.parametrize("mode", MODES)
async def test_lists_exactly_run_with_the_current_description(mode: str) -> None:
    gateway = FakeGateway()
    async with Client(build_run_server(gateway), mode=mode) as client:
        tools = (await client.list_tools()).tools
        assert [t.name for t in tools] == ["run"]
        assert tools[0].description == "Run Python code. Catalogue v1."
        assert tools[0].input_schema == RUN_INPUT_SCHEMA
        gateway.change()
        assert (await client.list_tools()).tools[0].description == "Run Python code. Catalogue v2."


@pytest.mark.parametrize("mode", MODES)
async def test_call_returns_the_gateway_result_as_is(mode: str) -> None:
    async with Client(build_run_server(FakeGateway()), mode=mode) as client:
        ok = await client.call_tool("run", {"code": "1 + 1"})
        assert (text(ok), ok.structured_content, ok.is_error) == ("echo: 1 + 1", {"result": "1 + 1"}, False)
        failed = await client.call_tool("run", {"code": "fail"})
        assert (text(failed), failed.structured_content, failed.is_error) == ("it failed", None, True)


@pytest.mark.parametrize("mode", MODES)
async def test_unknown_tool_says_only_run_exists(mode: str) -> None:
    async with Client(build_run_server(FakeGateway()), mode=mode) as client:
        result = await client.call_tool("exec", {"code": "1"})
        assert result.is_error
        assert text(result) == "Unknown tool 'exec': this endpoint has one tool, `run`, which runs Python code."


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(("arguments", "got"), [({}, "got nothing"), ({"code": 42}, "got int")])
async def test_bad_code_argument_says_what_was_expected(mode: str, arguments: dict, got: str) -> None:
    async with Client(build_run_server(FakeGateway()), mode=mode) as client:
        result = await client.call_tool("run", arguments)
        assert result.is_error
        assert "string argument `code`" in text(result) and got in text(result)


@pytest.mark.parametrize("mode", MODES)
async def test_gateway_exception_becomes_is_error_without_traceback(mode: str) -> None:
    async with Client(build_run_server(FakeGateway()), mode=mode) as client:
        result = await client.call_tool("run", {"code": "boom"})
        assert result.is_error
        assert "RuntimeError: kaboom" in text(result)
        assert "Traceback" not in text(result)
        # The server is still serving.
        assert not (await client.call_tool("run", {"code": "x"})).is_error


async def test_handshake_era_clients_are_told_list_changed_is_supported() -> None:
    async with Client(build_run_server(FakeGateway()), mode="legacy") as client:
        assert client.protocol_version == "2025-11-25"
        assert client.server_capabilities.tools.list_changed is True
