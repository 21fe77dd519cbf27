"""One reading of JSON schemas: signatures, the typed stubs, ``inspect``'s compression and argument validation
agree on what a schema describes. Each row is an edge case where they once disagreed."""

from __future__ import annotations

import re
from typing import Any

import pytest

from onetool.errors import ArgumentError
from onetool.registry import Pack, Registry, ToolSchema
from onetool.registry.schema import py_type
from onetool.schemas.walk import (
    ANYTHING,
    NOTHING,
    Array,
    Literals,
    Narrowed,
    Object,
    Ref,
    Scalar,
    Union,
    read,
    resolve_ref,
)
from onetool.serve.inspect.compress import compress
from onetool.stubs import tools_module
from tests.catalogue import upstream_tool

STR: dict[str, Any] = {"type": "string"}
INT: dict[str, Any] = {"type": "integer"}
NUM: dict[str, Any] = {"type": "number"}
DRAFT7 = {"$schema": "http://json-schema.org/draft-07/schema#"}


def stub_type(schema: dict[str, Any], prop: str = "x") -> str:
    """The type the stubs module gives the required parameter ``prop`` of a tool with input ``schema``."""
    module = tools_module(Registry({"p": Pack("p", {"t": upstream_tool("p", "t", schema, "")}, server="p")}))
    match = re.search(rf"def t\(self, {prop}: (.*?)(?:, \*\*\w+: .*)?\) -> ", module)
    assert match, module
    return match[1]


@pytest.mark.parametrize(
    ("sub", "root", "python", "typescript", "accepted", "rejected"),
    [
        # OpenAPI's nullable: compression alone honoured it, and validation rejected the null it showed.
        ({"type": "string", "nullable": True}, {}, "str | None", "string | null", [None, "a"], [3]),
        ({"$ref": "#/$defs/Id", "nullable": True}, {"$defs": {"Id": STR}}, "str | None", "string | null", [None], [3]),
        # null last whatever the order given (the signature's "= None" reads the last member).
        ({"type": ["null", "string"]}, {}, "str | None", "string | null", [None, "a"], [1.5]),
        ({"enum": ["a", None]}, {}, "Literal['a'] | None", '"a" | null', ["a", None], ["b"]),
        # additionalProperties alone implies an object, as properties do.
        ({"additionalProperties": INT}, {}, "dict[str, int]", "Record<string, integer>", [{"a": 1}], [{"a": "x"}]),
        # tuples: 2020-12 prefixItems (+ items for the rest) and draft 7's items list (+ additionalItems).
        ({"type": "array", "prefixItems": [STR, NUM]}, {}, "list[str | float]", "[string, number]", [["a", 1]], [[1]]),
        (
            {"prefixItems": [STR], "items": INT},
            {},
            "list[str | int]",
            "[string, ...integer[]]",
            [["a", 2]],
            [["a", 1.5]],
        ),
        (
            {"type": "array", "items": [STR], "additionalItems": INT},
            DRAFT7,
            "list[str | int]",
            "[string, ...integer[]]",
            [["a", 1, 2]],
            [["a", "b"]],
        ),
        # false and an empty enum admit nothing; {} admits anything and absorbs a union.
        (False, {}, "Never", "never", [], [1, None]),
        ({"enum": []}, {}, "Never", "never", [], ["a"]),
        ({"anyOf": [STR, {}]}, {}, "Any", "any", [3, "a"], []),
        # a JSON pointer in a URI fragment is percent-encoded.
        ({"$ref": "#/$defs/My%20Id"}, {"$defs": {"My Id": INT}}, "int", "integer", [1], ["a"]),
        # floats cannot be Literal members: both Python outputs fall back to the JSON type.
        ({"type": "number", "enum": [1.5, 2.5]}, {}, "float", "1.5 | 2.5", [1.5], [3.5]),
    ],
)
async def test_every_output_and_validation_read_a_schema_alike(
    sub: Any, root: dict[str, Any], python: str, typescript: str, accepted: list[Any], rejected: list[Any]
) -> None:
    schema = {**root, "type": "object", "properties": {"x": sub}, "required": ["x"]}
    assert py_type(sub, schema) == python
    assert stub_type(schema) == python
    assert compress(schema, max_description_len=0) == f"{{x: {typescript}}}"
    tool = ToolSchema(schema)
    for value in accepted:
        assert await tool.bind("f", [value], {}) == {"x": value}
    for value in rejected:
        with pytest.raises(ArgumentError):
            await tool.bind("f", [value], {})


ARGS = {"type": "object", "properties": {"path": STR, "n": INT}, "required": ["path"]}
BASE = {"type": "object", "properties": {"path": STR}, "required": ["path"]}


@pytest.mark.parametrize(
    "schema",
    [
        {"$ref": "#/$defs/Args", "$defs": {"Args": ARGS}},
        {"allOf": [{"$ref": "#/$defs/Base"}, {"properties": {"n": INT}}], "$defs": {"Base": BASE}},
    ],
)
async def test_arguments_behind_a_root_ref_or_allof_are_the_tools_parameters(schema: dict[str, Any]) -> None:
    # inspect always expanded them; the signature, the stubs and binding saw a tool without parameters.
    tool = ToolSchema(schema)
    assert tool.signature("f") == "f(path: str, n: int | None = None)"
    assert stub_type(schema, "path") == "str, n: int | None = None"
    assert compress(schema) in ("{path: string, n?: integer}", "{path: string} & {n?: integer}")
    assert await tool.bind("f", ["p", 3], {}) == {"path": "p", "n": 3}
    with pytest.raises(ArgumentError, match="unknown argument 'colour'"):
        await tool.bind("f", ["p"], {"colour": "red"})
    with pytest.raises(ArgumentError, match="missing required argument 'path'"):
        await tool.bind("f", [], {"n": 1})


@pytest.mark.parametrize("extra", [True, {}])
async def test_extra_arguments_allowed_by_true_or_an_empty_schema(extra: Any) -> None:
    # {} admits any value as true does: binding refused extra names that inspect and the stubs did not flag.
    schema = {"type": "object", "properties": {"a": STR}, "additionalProperties": extra}
    assert await ToolSchema(schema).bind("f", [], {"b": 1}) == {"b": 1}
    assert compress(schema) == "{a?: string, [key: string]: any}"
    module = tools_module(Registry({"p": Pack("p", {"t": upstream_tool("p", "t", schema, "")}, server="p")}))
    assert "def t(self, a: str | None = None, **kwargs: Any) -> Any:" in module


def test_malformed_required_names_are_left_out_everywhere() -> None:
    # py_type built a set of the entries and raised TypeError on an unhashable one.
    schema = {"type": "object", "properties": {"a": STR, "c": STR}, "required": [{}, ["a"], "c", "c"]}
    assert py_type(schema) == "{a?: str, c: str}"
    assert compress(schema) == "{a?: string, c: string}"
    assert ToolSchema(schema).required == ["c"]


def test_read_shapes() -> None:
    assert read(True, {}) is ANYTHING and read({}, {}) is ANYTHING and read(5, {}) is ANYTHING
    assert read(False, {}) is NOTHING
    assert read({"type": "integer"}, {}) == Scalar("integer")
    assert read({"const": 1, "type": "integer"}, {}) == Literals([1])
    assert Literals([1.5, "a", True, None, 2.5]).kinds == ["number", "string", "boolean", "null"]
    assert read({"oneOf": [STR]}, {}) == Union([STR])
    assert read({"type": ["string", "string"]}, {}) == Scalar("string")
    assert read({"items": True}, {}) == Array([], {})
    assert read({"type": "array", "prefixItems": [STR], "items": False}, {}).members == [STR]  # type: ignore[union-attr]
    shape = read({"properties": {"a": STR}, "required": ["a", "a", 1], "additionalProperties": False}, {})
    assert isinstance(shape, Object) and shape.required == ("a",) and shape.rest is False
    root = {"$defs": {"a/b~c": INT}}
    assert read({"$ref": "#/$defs/a~1b~0c"}, root) == Ref("#/$defs/a~1b~0c", "a/b~c", INT)
    assert read({"$ref": "#"}, root) == Ref("#", "Root", root)
    assert resolve_ref(root, "https://example.com/x.json") is None


def test_union_members_made_from_one_schema_are_that_schema_not_copies() -> None:
    # A large schema named by many $refs is read many times: each reading must not copy it.
    big = {"type": ["object", "null"], "nullable": True, **{f"x-{i}": i for i in range(10_000)}}
    nullable = read(big, {})
    assert isinstance(nullable, Union) and isinstance(nullable.members[0], Narrowed)
    assert nullable.members[0].schema is big
    typed = read(nullable.members[0], {})
    assert isinstance(typed, Union) and all(m.schema is big for m in typed.members)
    # A type list holds at most the seven JSON types: anything else makes it anything.
    assert read({"type": ["string", *map(str, range(10_000))]}, {}) is ANYTHING
