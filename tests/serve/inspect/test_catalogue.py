"""The catalogue fixture server (real schemas at benchmark sizes) and the benchmark's task in the three faces."""

from __future__ import annotations

import sys
from typing import Any, Literal

import pytest
import toon_format
from jsonschema import validators
from mcp import Client, StdioServerParameters

from bench.tokens_bench import SERVER, cut_note, seen, task_transcripts
from onetool.serve.inspect.compress import compress
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


async def test_the_benchmark_task_gives_one_answer_in_every_face() -> None:
    faces, transcripts = await task_transcripts(10)
    assert [t["name"] for t in faces.lists["direct"]] == [f"{SERVER}:{t['name']}" for t in catalogue(10)]
    assert [t["name"] for t in faces.lists["inspect"]] == ["inspect", "exec"]
    assert [t["name"] for t in faces.lists["run"]] == ["run"]
    assert f"  Server: {SERVER} - Acme workspace tools:" in faces.lists["inspect"][0]["description"]

    rows = transcripts["direct"].turns[-1][1].structured_content
    assert rows is not None and len(rows["results"]) == 20
    # The inspect face's TOON text decodes to the very rows the upstream sent.
    fetched = transcripts["inspect"].turns[-1][1]
    assert toon_format.decode(seen(fetched)) == rows == fetched.structured_content

    def selected(row: dict[str, Any], name: str) -> str:
        return str(row["properties"][name]["select"]["name"])

    expected = [
        r["properties"]["Name"]["title"][0]["plain_text"]
        for r in rows["results"]
        if selected(r, "Status") == "Open" and selected(r, "Priority") == "High"
    ]
    assert expected, "the fixture data must give the filter something to keep"
    answer = transcripts["run"].turns[-1][1].structured_content
    assert answer == {"result": expected}
    assert all(cut_note(t) == "" for t in transcripts.values())
