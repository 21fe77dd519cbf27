"""JSON schemas as TypeScript-style types, against expected strings."""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from typing import Any

import pytest

from onetool.serve.inspect.compress import compress
from tests.fixtures.dump_reference_tools import SERVERS, dump_server
from tests.serve.inspect.reference_tools import REFERENCE_TOOLS, reference_tool


def obj(properties: dict[str, Any], required: Sequence[str] = (), **extra: Any) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": list(required), **extra}


STR = {"type": "string"}
NUM = {"type": "number"}


def test_required_and_optional_properties() -> None:
    assert compress(obj({"path": STR, "head": NUM}, ["path"])) == "{path: string, head?: number}"


@pytest.mark.parametrize(
    ("schema", "expected"),
    [
        ({"type": "integer"}, "integer"),
        ({"type": "boolean"}, "boolean"),
        ({}, "any"),
        (True, "any"),
        (False, "never"),
        ({"type": "object"}, "object"),
        (obj({}), "{}"),
        ({"type": "array"}, "any[]"),
    ],
)
def test_simple_types(schema: Any, expected: str) -> None:
    assert compress(schema) == expected


def test_enums_are_unions_of_literals() -> None:
    schema = obj({"mode": {"type": "string", "enum": ["fast", "safe"]}, "level": {"enum": [1, 2, None]}}, ["mode"])
    assert compress(schema) == '{mode: "fast" | "safe", level?: 1 | 2 | null}'
    assert compress({"const": "v1"}) == '"v1"'


def test_long_enums_say_how_many_more() -> None:
    assert compress({"enum": list(range(25))}) == " | ".join(str(i) for i in range(20)) + " | ...5 more"


def test_nested_arrays() -> None:
    matrix = {"type": "array", "items": {"type": "array", "items": NUM}}
    rows = {"type": "array", "items": obj({"id": STR, "tags": {"type": "array", "items": STR}}, ["id"])}
    mixed = {"type": "array", "items": {"anyOf": [STR, NUM]}}
    tuple_ = {"type": "array", "prefixItems": [STR, NUM]}
    assert compress(obj({"m": matrix, "rows": rows, "mixed": mixed, "pair": tuple_})) == (
        "{m?: number[][], rows?: {id: string, tags?: string[]}[], mixed?: (string | number)[], pair?: [string, number]}"
    )


def test_unions_and_nullable() -> None:
    schema = obj(
        {
            "a": {"anyOf": [STR, NUM]},
            "b": {"oneOf": [obj({"x": STR}, ["x"]), obj({"y": NUM}, ["y"])]},
            "c": {"type": ["string", "null"]},
            "d": {"anyOf": [{"type": "array", "items": STR}, {"type": "null"}], "default": None},
            "e": {"type": "string", "nullable": True},
            "f": {"anyOf": [STR, {}]},
        }
    )
    assert compress(schema) == (
        "{a?: string | number, b?: {x: string} | {y: number}, c?: string | null, d?: string[] | null, "
        "e?: string | null, f?: any}"
    )


def test_unions_in_arrays_and_intersections_are_grouped() -> None:
    schema = {"type": "array", "items": {"allOf": [{"anyOf": [STR, NUM]}, {"enum": ["a", 1]}]}}
    assert compress(schema) == '((string | number) & ("a" | 1))[]'


def test_defaults_shown_after_the_type() -> None:
    schema = obj(
        {
            "head": {"type": "integer", "default": 10},
            "mode": {"enum": ["a", "b"], "default": "a"},
            "opts": {"type": "object", "default": {"deep": [1, 2]}},
            "url": {"type": "string", "default": "https://example.com/" + "x" * 100},
            "maybe": {"type": ["string", "null"], "default": None},
        }
    )
    assert compress(schema) == (
        '{head?: integer = 10, mode?: "a" | "b" = "a", opts?: object = {"deep":[1,2]}, '
        'url?: string = "https://example.com/xxxxxxxxxxxxxxxxxxxx...", maybe?: string | null}'
    )


def test_descriptions_cut_at_max_description_len() -> None:
    schema = obj({"q": {"type": "string", "description": "Search   query.\nSupports */ and quotes."}}, ["q"])
    assert compress(schema, max_description_len=1000) == "{q: string /* Search query. Supports *\\/ and quotes. */}"
    assert compress(schema, max_description_len=12) == "{q: string /* Search query... */}"
    assert compress(schema, max_description_len=0) == "{q: string}"


def test_refs_resolved_from_defs_and_definitions() -> None:
    schema = obj(
        {"owner": {"$ref": "#/$defs/User"}, "team": {"$ref": "#/definitions/Team"}},
        ["owner"],
        **{
            "$defs": {"User": obj({"login": STR}, ["login"], description="A GitHub user")},
            "definitions": {
                "Team": obj({"slug": STR, "members": {"type": "array", "items": {"$ref": "#/$defs/User"}}})
            },
        },
    )
    assert compress(schema) == (
        "{owner: {login: string} /* A GitHub user */, team?: {slug?: string, members?: {login: string}[]}}"
    )


def test_cyclic_refs_shown_by_name() -> None:
    schema = {
        "$ref": "#/$defs/Node",
        "$defs": {
            "Node": obj({"name": STR, "children": {"type": "array", "items": {"$ref": "#/$defs/Node"}}}, ["name"]),
            "A": {"$ref": "#/$defs/B"},
            "B": {"anyOf": [{"$ref": "#/$defs/A"}, NUM]},
        },
    }
    assert compress(schema) == "{name: string, children?: Node[]}"
    assert compress({**schema, "$ref": "#/$defs/A"}) == "A | number"


def test_missing_and_remote_refs_shown_by_name() -> None:
    schema = obj({"a": {"$ref": "#/$defs/Gone"}, "b": {"$ref": "https://example.com/schemas/Address.json"}})
    assert compress(schema) == "{a?: Gone, b?: Address.json}"


def test_maps_and_extra_properties() -> None:
    schema = obj(
        {
            "labels": {"type": "object", "additionalProperties": STR},
            "meta": {"type": "object", "additionalProperties": True},
            "row": {"type": "object", "properties": {"id": NUM}, "required": ["id"], "additionalProperties": NUM},
        }
    )
    assert compress(schema) == (
        "{labels?: Record<string, string>, meta?: Record<string, any>, row?: {id: number, [key: string]: number}}"
    )


def test_odd_property_names_are_quoted() -> None:
    assert compress(obj({"x-request-id": STR, "ok_1": STR, 'q"': STR})) == (
        '{"x-request-id"?: string, ok_1?: string, "q\\""?: string}'
    )


def test_malformed_schemas_degrade_to_any() -> None:
    schema = {"type": "object", "properties": {"a": 5, "b": {"type": 7}, "c": STR}, "required": [{}, ["a"], "c"]}
    assert compress(schema) == "{a?: any, b?: any, c: string}"
    assert compress({"type": "array", "items": {"$ref": 5}}) == "any[]"
    assert compress({"type": ["string", {"x": 1}]}) == "any"


def test_depth_cap() -> None:
    schema: dict[str, Any] = STR
    for _ in range(30):
        schema = obj({"n": schema})
    assert compress(schema, max_depth=3) == "{n?: {n?: {n?: {n?: ...}}}}"


def test_hostile_schemas_are_bounded() -> None:
    # A chain of definitions each referencing the next twice expands to 2**40 nodes without the node cap.
    defs = {f"D{i}": obj({"l": {"$ref": f"#/$defs/D{i + 1}"}, "r": {"$ref": f"#/$defs/D{i + 1}"}}) for i in range(40)}
    prop = {"enum": list(range(10_000)), "description": "d" * 100_000}
    wide = obj({f"p{i}": prop for i in range(50_000)})
    numbers = list(range(1000))
    big_default = obj({"x": {"type": "object", "default": {str(i): numbers for i in range(1000)}}})
    start = time.perf_counter()
    bomb = compress({"$ref": "#/$defs/D0", "$defs": defs}, max_depth=100)
    flat = compress(wide, max_chars=10_000)
    assert compress(big_default) == '{x?: object = {"0":[0,1,2,3,4,5,6,7,8,9,10,11,12,13,14...}'
    assert time.perf_counter() - start < 10  # generous: the caps make this milliseconds
    assert len(bomb) <= 8_003
    assert bomb.endswith("...")
    assert len(flat) == 10_003


def test_reference_schemas() -> None:
    expected = {
        ("everything", "echo"): "{message: string /* Message to echo */}",
        ("everything", "get-tiny-image"): "{}",
        ("everything", "get-sum"): "{a: number /* First number */, b: number /* Second number */}",
        ("everything", "get-resource-reference"): (
            '{resourceType?: "Text" | "Blob" = "Text", resourceId?: number = 1 /* ID of the text resource to fetch */}'
        ),
        ("everything", "get-annotated-message"): (
            '{messageType: "error" | "success" | "debug" /* Type of message to demonstrate different annotation '
            "patterns */, includeImage?: boolean = false /* Whether to include an example image */}"
        ),
        ("everything", "gzip-file-as-resource"): (
            '{name?: string = "README.md.gz" /* Name of the output file */, '
            'data?: string = "https://raw.githubusercontent.com/modelc..." '
            "/* URL or data URI of the file content to compress */, "
            'outputType?: "resourceLink" | "resource" = "resourceLink" /* How the resulting gzipped file should '
            "be returned. 'resourceLink' returns a link... */}"
        ),
        ("time", "get_current_time"): (
            "{timezone: string /* IANA timezone name (e.g., 'America/New_York', 'Europe/London'). "
            "Use 'Etc/UTC' as... */}"
        ),
    }
    for (server, name), text in expected.items():
        assert compress(reference_tool(server, name)["inputSchema"]) == text, name


def test_reference_output_schema_with_defs() -> None:
    time_result = "{timezone: string, datetime: string, day_of_week: string, is_dst: boolean}"
    assert compress(reference_tool("time", "convert_time")["outputSchema"]) == (
        f"{{source: {time_result}, target: {time_result}, time_difference: string}}"
    )


def test_saving_on_reference_schemas() -> None:
    """The spec's claim: compressed input schemas are 60-70% smaller than their JSON."""
    tools = [t for server in REFERENCE_TOOLS.values() for t in server["tools"]]
    raw = sum(len(json.dumps(t["inputSchema"])) for t in tools)
    compressed = sum(len(compress(t["inputSchema"])) for t in tools)
    assert compressed < 0.4 * raw


async def test_fixture_matches_the_live_reference_servers() -> None:
    """reference_tools.json is what the pinned servers really list (regenerate it when this fails)."""
    for name, params in SERVERS.items():
        live = await dump_server(params)
        assert live["tools"] == REFERENCE_TOOLS[name]["tools"], name
        assert live["instructions"] == REFERENCE_TOOLS[name]["instructions"], name
