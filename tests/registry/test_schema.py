"""Tool input schemas as Python signatures, and argument binding against them."""

from __future__ import annotations

import re
import socket
from types import MappingProxyType

import pytest

from onetool.errors import ArgumentError
from onetool.registry.schema import (
    MAX_RUN_VALUES,
    MAX_TYPE_CHARS,
    MAX_VALUES,
    ArgumentCap,
    CheckBudget,
    ToolSchema,
    py_type,
    return_type,
)
from onetool.schemas.validation import measure
from tests.catalogue import BOOL, ENTITY, INT, STR, TIME_RESULT, listof, obj

PRODUCT = ToolSchema(
    {
        "type": "object",
        "properties": {
            "product_id": {"type": "string"},
            "include_variants": {"type": "boolean", "default": False},
            "tags": {"type": "array", "items": {"type": "string"}},
            "mode": {"enum": ["a", "b"]},
        },
        "required": ["product_id"],
    }
)


def test_signature() -> None:
    assert PRODUCT.signature("wix.get_product") == (
        "wix.get_product(product_id: str, include_variants: bool = False, tags: list[str] | None = None, "
        "mode: Literal['a', 'b'] | None = None)"
    )


@pytest.mark.parametrize(
    ("schema", "text"),
    [
        ({"type": "integer"}, "int"),
        ({"type": ["string", "null"]}, "str | None"),
        ({"anyOf": [{"type": "number"}, {"type": "string"}]}, "float | str"),
        ({"type": "object", "additionalProperties": {"type": "integer"}}, "dict[str, int]"),
        ({}, "Any"),
    ],
)
def test_py_type(schema: dict, text: str) -> None:
    assert py_type(schema) == text


NODE_DEFS = {
    "$defs": {
        "Node": obj({"name": STR}, children=listof({"$ref": "#/$defs/Node"})),
        "Base": obj({"id": INT}),
    }
}


@pytest.mark.parametrize(
    ("schema", "text"),
    [
        # nested objects, optional fields marked
        (obj({"user": obj({"id": INT}, note=STR)}), "{user: {id: int, note?: str}}"),
        # arrays of objects: the item fields the model would otherwise guess one error at a time
        (listof(ENTITY), "list[{name: str, entityType: str, observations: list[str]}]"),
        ({"type": ["object", "null"], "properties": {"a": BOOL}}, "{a?: bool} | None"),
        ({"properties": {"a": STR}, "required": ["a"]}, "{a: str}"),  # no "type", still an object
        ({"enum": list("abcdefghij")}, "Literal['a', 'b', 'c', 'd', 'e', 'f', 'g', 'h', ...]"),
        (obj({"content-type": STR}), "{'content-type': str}"),
        # $ref, a recursive one named where it recurses, and pydantic's allOf
        ({**NODE_DEFS, **obj({"tree": {"$ref": "#/$defs/Node"}})}, "{tree: Node{name: str, children?: list[Node]}}"),
        ({**NODE_DEFS, "allOf": [{"$ref": "#/$defs/Base"}, obj(extra=STR)]}, "{id: int, extra?: str}"),
        ({"$ref": "https://example.com/remote.json"}, "remote.json"),
        ({"$ref": "#/$defs/Missing"}, "Missing"),
        # bounded depth: past four levels an object is a dict
        (obj({"a": obj({"b": obj({"c": obj({"d": obj({"e": STR})})})})}), "{a: {b: {c: {d: dict}}}}"),
    ],
)
def test_nested_shapes(schema: dict, text: str) -> None:
    assert py_type(schema) == text


def test_wide_objects_are_cut_and_huge_schemas_bounded() -> None:
    wide = obj(**{f"field{i}": STR for i in range(20)})
    assert py_type(wide).endswith("field11?: str, ...}")
    # Every field a union of wide objects: tens of millions of nodes if rendered in full.
    hostile = obj(
        **{f"f{i}": {"anyOf": [obj(**{f"p{j}": wide for j in range(30)}) for _ in range(30)]} for i in range(99)}
    )
    text = py_type(hostile)
    assert len(text) <= MAX_TYPE_CHARS
    assert text.startswith("{f0?: dict, f1?: dict,")


def test_return_shape_from_output_schema() -> None:
    assert return_type(None) is None
    assert return_type(TIME_RESULT) == "{timezone: str, datetime: str, day_of_week: str, is_dst: bool}"
    # mcp-server-time's convert_time: the result type is a $ref into $defs of the output schema
    conversion = {
        "$defs": {"TimeResult": TIME_RESULT},
        **obj({"source": {"$ref": "#/$defs/TimeResult"}, "time_difference": STR}),
    }
    assert return_type(conversion) == (
        "{source: {timezone: str, datetime: str, day_of_week: str, is_dst: bool}, time_difference: str}"
    )


def test_python_sdk_result_envelope_is_unwrapped() -> None:
    assert return_type(obj({"result": INT})) == "int"
    assert return_type(obj({"result": listof(obj({"id": INT}))})) == "list[{id: int}]"
    assert return_type(obj({"result": INT, "unit": STR})) == "{result: int, unit: str}"  # two keys: no envelope
    assert (
        ToolSchema(obj({"a": INT, "b": INT})).signature("fx.add", returns=obj({"result": INT}))
        == "fx.add(a: int, b: int) -> int"
    )


def test_long_defaults_are_elided() -> None:
    schema = ToolSchema(
        obj(url={"type": "string", "default": "https://example.com/" + "x" * 60}, n={"type": "integer", "default": 3})
    )
    assert schema.signature("f") == "f(url: str = ..., n: int = 3)"


async def test_positional_arguments_follow_property_order() -> None:
    assert await PRODUCT.bind("f", ["p1", True], {"mode": "a"}) == {
        "product_id": "p1",
        "include_variants": True,
        "mode": "a",
    }


@pytest.mark.parametrize(
    ("args", "kwargs", "expected"),
    [
        ([], {}, "missing required argument 'product_id'"),
        (["p"], {"colour": "red"}, "unknown argument 'colour'; it accepts: product_id, include_variants, tags, mode"),
        (["p", True, [], "a", 5], {}, "takes 4 positional arguments but 5 were given"),
        (["p"], {"product_id": "q"}, "multiple values for argument 'product_id'"),
        ([7], {}, "argument 'product_id': 7 is not of type \"string\""),
        (["p"], {"mode": "c"}, 'argument \'mode\': "c" is not one of "a" or "b"'),
    ],
)
async def test_bad_arguments(args: list, kwargs: dict, expected: str) -> None:
    with pytest.raises(ArgumentError) as info:
        await PRODUCT.bind("wix.get_product(...)", args, kwargs)
    assert expected in str(info.value)
    assert str(info.value).startswith("wix.get_product(...)")


async def test_schema_without_properties_accepts_anything_unless_closed() -> None:
    assert await ToolSchema({"type": "object"}).bind("f", [], {"x": 1}) == {"x": 1}
    with pytest.raises(ArgumentError):
        await ToolSchema({"type": "object", "additionalProperties": False}).bind("f", [], {"x": 1})


async def test_broken_schema_leaves_judgement_to_the_upstream() -> None:
    broken = ToolSchema({"type": "object", "properties": {"a": {"type": "no-such-type"}}})
    assert await broken.bind("f", [1], {}) == {"a": 1}


STRINGS = ToolSchema({"type": "object", "properties": {"items": {"type": "array", "items": {"type": "string"}}}})
ORDERS = ToolSchema(
    {
        "type": "object",
        "properties": {
            "orders": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {"sku": {"type": "string"}, "quantity": {"type": "integer"}},
                    "required": ["sku", "quantity"],
                },
            }
        },
        "required": ["orders"],
    }
)
CAP = ArgumentCap(4 * 1024 * 1024, "servers.wix.max_argument_mb")


async def test_large_arguments_are_checked_too_and_the_first_error_is_reported() -> None:
    # Nothing goes on unchecked: a bad value at the end of a large argument is found here, not by the upstream.
    with pytest.raises(ArgumentError, match=re.escape("argument 'items.79999': 1 is not of type \"string\"")):
        await STRINGS.bind("f", [["x"] * 79_999 + [1]], {}, cap=CAP)
    assert len((await STRINGS.bind("f", [["x"] * 80_000], {}, cap=CAP))["items"]) == 80_000
    # Every item breaks the schema: the first error is the answer, however many follow it.
    with pytest.raises(ArgumentError, match=re.escape("argument 'orders.0': \"sku\" is a required property")):
        await ORDERS.bind("wix.create_orders(...)", [], {"orders": [{}] * 90_000}, cap=CAP)


async def test_arguments_past_the_bounds_are_refused_never_passed_on() -> None:
    with pytest.raises(ArgumentError, match=f"more than {MAX_VALUES:,} values, more than the gateway checks"):
        await ORDERS.bind("wix.create_orders(...)", [], {"orders": [{}] * 1_000_000}, cap=CAP)
    small = ArgumentCap(1024 * 1024, "servers.wix.max_argument_mb")
    with pytest.raises(ArgumentError) as info:
        await STRINGS.bind("wix.count(...)", [["x" * 1000] * 1100], {}, cap=small)
    assert str(info.value) == (
        "wix.count(...): its arguments take more than 1.0 MB as JSON, the most servers.wix.max_argument_mb lets "
        "a call send; pass less data per call"
    )
    # Characters outside ASCII count as the bytes they take.
    with pytest.raises(ArgumentError, match=re.escape("servers.wix.max_argument_mb")):
        await STRINGS.bind("wix.count(...)", [["\u00e9" * 1000] * 600], {}, cap=small)
    assert await STRINGS.bind("wix.count(...)", [["x" * 1000] * 600], {}, cap=small)
    # A broken schema cannot be checked, but its calls are still measured and capped.
    broken = ToolSchema({"type": "object", "properties": {"a": {"type": "no-such-type"}}})
    with pytest.raises(ArgumentError, match="more than 100,000 values"):
        await broken.bind("f", [[0] * MAX_VALUES], {}, cap=CAP)


async def test_a_run_cannot_multiply_the_checks_with_a_loop_of_calls() -> None:
    budget = CheckBudget()
    calls = 0
    with pytest.raises(ArgumentError) as info:
        while calls < 100:
            await STRINGS.bind("f", [["x"] * (MAX_VALUES - 10)], {}, cap=CAP, budget=budget)
            calls += 1
    assert calls == MAX_RUN_VALUES // MAX_VALUES
    assert f"this run's calls passed more than {MAX_RUN_VALUES:,} values in all" in str(info.value)
    # Another run has a budget of its own.
    assert await STRINGS.bind("f", [["x"]], {}, cap=CAP, budget=CheckBudget())


def test_the_measure_stops_past_either_cap() -> None:
    # {}, "a", [], 1, "xy", null, {}, "b", 1.5: a string its length and quotes and comma, a small int 2
    assert measure({"a": [1, "xy", None, {"b": 1.5}]}, 100, 1000) == (9, 2 + 4 + 2 + 2 + 5 + 25 + 2 + 4 + 25)
    assert measure({"a": ["x"] * 1_000_000}, 1000, 10**9)[0] == 1001
    assert measure({"a": ["x" * 100] * 1_000_000}, 10**9, 1000)[1] <= 1000 + 103
    assert measure({"a": [10**300]}, 100, 10**9)[1] > 300  # a huge number counts its digits


async def test_a_hostile_schema_costs_the_gateway_no_connection_and_no_runaway_regex() -> None:
    listener = socket.create_server(("127.0.0.1", 0))
    listener.setblocking(False)
    port = listener.getsockname()[1]
    with listener:
        remote = ToolSchema({"type": "object", "properties": {"a": {"$ref": f"http://127.0.0.1:{port}/s.json"}}})
        # The schema cannot be read without fetching: the upstream judges the call, and nothing was fetched.
        assert await remote.bind("f", [1], {}, cap=CAP) == {"a": 1}
        with pytest.raises(BlockingIOError):
            listener.accept()
    # A pattern that backtracks exponentially in Python's re is answered at once.
    redos = ToolSchema({"type": "object", "properties": {"a": {"type": "string", "pattern": "^(a|a)*$"}}})
    with pytest.raises(ArgumentError, match="does not match"):
        await redos.bind("f", ["a" * 60 + "b"], {}, cap=CAP)


async def test_keyword_names_are_bounded_before_any_work() -> None:
    schema = ToolSchema({"type": "object", "properties": {"a": {"type": "integer"}}})
    names = {f"n{i}": 1 for i in range(400_000)}
    with pytest.raises(ArgumentError, match=re.escape("f got 400,000 keyword arguments; it accepts: a")):
        await schema.bind("f", [], names)
    few = {f"n{i}": 1 for i in range(50)}
    with pytest.raises(ArgumentError, match=re.escape("'n0', 'n1', 'n10', ") + ".* and 40 more; it accepts: a"):
        await schema.bind("f", [], few)


async def test_a_read_only_mapping_schema_is_still_enforced() -> None:
    # The validator takes only a dict for an object: a schema given as another mapping must not go unchecked.
    schema = ToolSchema(MappingProxyType({"type": "object", "properties": {"a": {"type": "integer"}}}))
    with pytest.raises(ArgumentError, match='"x" is not of type "integer"'):
        await schema.bind("f", ["x"], {})
