"""Tool input schemas as Python signatures, and argument binding against them."""

from __future__ import annotations

import re

import pytest

from onetool.errors import ArgumentError
from onetool.registry.schema import ToolSchema, py_type

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
        ([7], {}, "argument 'product_id': 7 is not of type 'string'"),
        (["p"], {"mode": "c"}, "argument 'mode': 'c' is not one of ['a', 'b']"),
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


async def test_large_arguments_are_checked_in_full_and_bounded() -> None:
    schema = ToolSchema({"type": "object", "properties": {"items": {"type": "array", "items": {"type": "string"}}}})
    assert len((await schema.bind("f", [["x"] * 50_000], {}))["items"]) == 50_000
    with pytest.raises(ArgumentError, match=re.escape("argument 'items.49999': 1 is not of type 'string'")):
        await schema.bind("f", [["x"] * 49_999 + [1]], {})
    with pytest.raises(ArgumentError, match=re.escape("more than 100,000 values; pass less data per call")):
        await schema.bind("f", [["x"] * 200_000], {})
