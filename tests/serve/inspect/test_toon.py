"""Exec results: TOON text that decodes to structuredContent, media passed through, the cut."""

from __future__ import annotations

import json
from typing import Any

import toon_format
from mcp import Client, types

from onetool.serve.inspect._toon import data_result, exec_result
from tests.fixtures.dump_reference_tools import SERVERS


def text_of(result: types.CallToolResult) -> str:
    assert len(result.content) >= 1
    first = result.content[0]
    assert isinstance(first, types.TextContent)
    return first.text


def round_trip(value: Any) -> types.CallToolResult:
    """The exec result of an upstream that returned ``value`` as JSON text, checked to decode back to it."""
    upstream = types.CallToolResult(content=[types.TextContent(type="text", text=json.dumps(value))])
    result = exec_result(upstream)
    assert result.is_error is False
    structured = result.structured_content
    expected = value if isinstance(value, dict) else {"result": value}
    assert structured == expected
    raw = structured if isinstance(value, dict) else structured["result"]
    assert toon_format.decode(text_of(result)) == raw
    return result


def test_nested_objects() -> None:
    value = {"repo": {"owner": {"login": "octo", "id": 1}, "topics": ["mcp", "tools"], "stats": {"stars": 12.5}}}
    assert text_of(round_trip(value)) == (
        "repo:\n  owner:\n    login: octo\n    id: 1\n  topics[2]: mcp,tools\n  stats:\n    stars: 12.5"
    )


def test_uniform_objects_become_a_table() -> None:
    issues = [{"id": i, "title": f"Bug {i}", "open": i % 2 == 0} for i in range(3)]
    text = text_of(round_trip({"issues": issues}))
    assert text == "issues[3]{id,title,open}:\n  0,Bug 0,true\n  1,Bug 1,false\n  2,Bug 2,true"


def test_top_level_list_is_wrapped_in_structured_content() -> None:
    result = round_trip([{"a": 1}, {"a": 2}])
    assert result.structured_content == {"result": [{"a": 1}, {"a": 2}]}


def test_mixed_lists_number_like_strings_and_unicode() -> None:
    value = {
        "mixed": [1, "two", None, True, [3, "4"], {"k": "v"}],
        "zip": "007",
        "numbers_as_text": ["1e3", "-5", "true", "null", ""],
        "unicode": "Grüße, 世界 🌍",
        "tricky": "a, b: [c]\n- d",
    }
    result = round_trip(value)
    assert result.structured_content["zip"] == "007"
    assert '"007"' in text_of(result)


def test_plain_text_stays_text() -> None:
    upstream = types.CallToolResult(content=[types.TextContent(type="text", text="007")])
    result = exec_result(upstream)
    assert result.content == upstream.content
    assert result.structured_content is None


def test_several_text_parts_with_data_are_a_list() -> None:
    upstream = types.CallToolResult(
        content=[types.TextContent(type="text", text="Found:"), types.TextContent(type="text", text='{"n": 2}')]
    )
    result = exec_result(upstream)
    assert result.structured_content == {"result": ["Found:", {"n": 2}]}
    assert toon_format.decode(text_of(result)) == ["Found:", {"n": 2}]


def test_data_result_cut_with_a_note() -> None:
    rows = [{"id": i, "name": f"row {i}"} for i in range(1000)]
    full = toon_format.encode(rows)
    result = data_result(rows, max_chars=500)
    text = text_of(result)
    assert text.startswith(full[:500])
    assert text.endswith(
        f"[result cut: showing 500 of {len(full):,} characters; ask for less, e.g. with the "
        "tool's limit, page or filter arguments]"
    )
    assert result.structured_content == {"result": text, "truncated": True}


def test_text_parts_share_the_budget() -> None:
    image = types.ImageContent(type="image", data="aGk=", mime_type="image/png")
    upstream = types.CallToolResult(
        content=[types.TextContent(type="text", text="x" * 80), image, types.TextContent(type="text", text="y" * 80)]
    )
    first, media, second = exec_result(upstream, max_chars=100).content
    assert isinstance(first, types.TextContent) and first.text == "x" * 80
    assert media == image
    assert isinstance(second, types.TextContent)
    assert second.text.startswith("y" * 20 + "\n... [result cut: showing 20 of 80 characters")


async def call_everything(calls: list[tuple[str, dict[str, Any]]]) -> list[types.CallToolResult]:
    async with Client(SERVERS["everything"], read_timeout_seconds=30) as client:
        return [await client.call_tool(name, args) for name, args in calls]


async def test_reference_server_results() -> None:
    structured, image, resource, links, error = await call_everything(
        [
            ("get-structured-content", {"location": "Chicago"}),
            ("get-tiny-image", {}),
            ("get-resource-reference", {"resourceType": "Blob", "resourceId": 2}),
            ("get-resource-links", {"count": 2}),
            ("get-sum", {"a": "x"}),
        ]
    )

    result = exec_result(structured)
    assert result.structured_content == structured.structured_content
    assert toon_format.decode(text_of(result)) == structured.structured_content
    assert len(result.content) == 1  # the upstream's JSON text duplicate is dropped

    for upstream in (image, resource, links):
        media = [c for c in upstream.content if not isinstance(c, types.TextContent)]
        assert media, upstream
        result = exec_result(upstream)
        assert result.content == upstream.content  # text stays text, media unchanged, order kept
        assert result.structured_content is None

    result = exec_result(error)
    assert result.is_error is True
    assert "expected number, received string at a" in text_of(result)


async def test_time_server_structured_result() -> None:
    async with Client(SERVERS["time"], read_timeout_seconds=30) as client:
        upstream = await client.call_tool("get_current_time", {"timezone": "Etc/UTC"})
    result = exec_result(upstream)
    assert upstream.structured_content is not None
    assert result.structured_content == upstream.structured_content
    assert toon_format.decode(text_of(result)) == upstream.structured_content
    assert text_of(result).startswith("timezone: Etc/UTC\ndatetime: ")


def test_python_sdk_result_envelope_is_read_as_its_value() -> None:
    envelope = {"result": ["a", "b"]}
    upstream = types.CallToolResult(
        content=[types.TextContent(type="text", text=json.dumps(envelope))], structured_content=envelope
    )
    schema = {"type": "object", "properties": {"result": {"type": "array"}}, "required": ["result"]}
    result = exec_result(upstream, output_schema=schema)
    assert text_of(result) == "[2]: a,b"
    assert result.structured_content == envelope
    # Without the schema that declares it, a lone "result" key is the tool's own data.
    assert text_of(exec_result(upstream)) == "result[2]: a,b"
