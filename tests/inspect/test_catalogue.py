"""The catalogue fixture server (real schemas at benchmark sizes) and the benchmark's three tool lists."""

from __future__ import annotations

import sys
from typing import Literal

import pytest
from jsonschema import validators
from mcp import Client, StdioServerParameters, types

from bench.tokens_bench import Server, tool_lists
from onetool.inspect import compress
from tests.conftest import FIXTURES
from tests.fixtures.catalogue_tools import catalogue


def catalogue_server(n: int) -> StdioServerParameters:
    return StdioServerParameters(command=sys.executable, args=[str(FIXTURES / "catalogue_server.py"), str(n)])


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_catalogue_server_lists_valid_real_schemas(mode: Literal["auto", "legacy"]) -> None:
    async with Client(catalogue_server(200), mode=mode, read_timeout_seconds=30) as client:
        tools = (await client.list_tools()).tools
        called = await client.call_tool("w2_create_issue", {"owner": "o"})
    assert len(tools) == 200
    assert len({t.name for t in tools}) == 200
    assert called.structured_content == {"tool": "w2_create_issue", "arguments": {"owner": "o"}}
    for tool in tools:
        validators.validator_for(tool.input_schema).check_schema(tool.input_schema)
        # Realistic schemas compress whole: the depth and size caps are for hostile ones only.
        assert ": ..." not in compress(tool.input_schema), tool.name
    create_page = next(t for t in tools if t.name == "notion_create_page")
    assert "children?: block[] /* Nested blocks */" in compress(create_page.input_schema)


def test_tool_lists_of_the_three_faces() -> None:
    tools = [types.Tool.model_validate(t) for t in catalogue(50)]
    lists = tool_lists([Server(name="acme", instructions="Acme's tools.", tools=tools)])
    assert [t["name"] for t in lists["direct"]] == [f"acme:{t.name}" for t in tools]
    assert lists["direct"][1]["inputSchema"] == tools[1].input_schema
    assert [t["name"] for t in lists["inspect"]] == ["inspect", "exec"]
    inspect_text = lists["inspect"][0]["description"]
    assert "  Server: acme - Acme's tools." in inspect_text
    assert all(f"    - {t.name}" in inspect_text for t in tools)
    assert [t["name"] for t in lists["run"]] == ["run"]
    assert "acme" in lists["run"][0]["description"]
