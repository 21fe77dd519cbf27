"""A tool's JSON schemas as a Python signature, and argument binding against the input schema.

Upstream tools are described by JSON Schema; snippets call them like Python
functions. This module maps one to the other: ``signature()`` renders
``create_entities(entities: list[{name: str, note?: str}]) -> {created: int}``
for docs and errors (nested object fields inline, ``?`` marking optional ones,
the return shape from the output schema), and ``bind()`` turns ``(args, kwargs)``
into the arguments object, checking it before the call leaves the gateway.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import anyio.lowlevel

from onetool.errors import ArgumentError
from onetool.registry.results import is_envelope_schema
from onetool.schemas.validation import MAX_RUN_VALUES, MAX_VALUES, CheckBudget, Validator, measure
from onetool.schemas.walk import (
    CUT,
    NOTHING,
    AllOf,
    Array,
    Literals,
    Object,
    Ref,
    Scalar,
    Shape,
    Union,
    Walk,
    merge_all_of,
    object_view,
    read,
    union,
)
from onetool.text import shown_name

__all__ = [
    "MAX_EXTRA_NAMES",
    "MAX_LITERALS",
    "MAX_RUN_VALUES",
    "MAX_TYPE_CHARS",
    "MAX_VALUES",
    "ArgumentCap",
    "CheckBudget",
    "ToolSchema",
    "count_nodes",
    "literal_values",
    "py_type",
    "py_union",
    "return_type",
    "union_members",
]

_SIMPLE = {
    "string": "str",
    "integer": "int",
    "number": "float",
    "boolean": "bool",
    "null": "None",
    "object": "dict",
    "array": "list",
}

MAX_TYPE_CHARS = 200
"""One parameter's or return's type; a larger shape is shown less deep (``list[dict]``), down to its bare kind."""
_MAX_DEPTH = 4
"""Nested lists and objects shown: ``list[{name: str, tags: list[str]}]`` is three deep."""
_MAX_FIELDS = 12
"""Fields of one object shown; more are ``...``."""
_MAX_ENUM = 8
"""Values of an enum, and members of a union, shown; more are ``...``."""
_MAX_NODES = 400
"""Subschemas one rendering visits: bounds the work a hostile schema (wide unions of wide objects) can cause."""
MAX_LITERALS = 100
"""Enum values spelled as a ``Literal``; a longer enum is typed by its JSON type."""
_MAX_DEFAULT_CHARS = 40
"""A longer default is shown as ``= ...``: it says the argument may be left out without spending the budget."""


def py_type(schema: Any, root: Mapping[str, Any] | None = None) -> str:
    """A compact Python-style type for a JSON schema: ``list[{id: int, note?: str}]``, ``Literal['a']``, ``int | None``.

    ``$ref`` pointers resolve against ``root`` (the schema itself by default); a recursive one is shown by its
    name after the first expansion (``Node{children?: list[Node]}``).
    """
    base = root if isinstance(root, Mapping) else schema if isinstance(schema, Mapping) else {}
    for depth in range(_MAX_DEPTH, -1, -1):
        shapes = _Shapes(base)
        text = shapes.render(schema, depth, ())
        if len(text) <= MAX_TYPE_CHARS and not shapes.cut:
            return text
    return _bare(read(schema, base))


def return_type(output_schema: Mapping[str, Any] | None) -> str | None:
    """What a tool returns, from its output schema; the Python SDK's ``{"result": X}`` envelope shows as ``X``.

    None when the tool declares no output schema (its result is then whatever data its content holds).
    """
    if not isinstance(output_schema, Mapping) or not output_schema:
        return None
    if is_envelope_schema(output_schema):
        return py_type(output_schema["properties"]["result"], output_schema)
    return py_type(output_schema)


def literal_values(values: list[Any]) -> bool:
    """Whether ``Literal[...]`` can hold these enum values (strings, integers, booleans, None) and is short enough to
    be worth it; others are typed by their JSON type. The stubs module and signatures spell enums alike."""
    return len(values) <= MAX_LITERALS and all(v is None or isinstance(v, str | int) for v in values)


def py_union(members: Iterable[str]) -> str:
    """Python type texts joined as one union (:func:`~onetool.schemas.walk.union`'s rules)."""
    flat = [m for text in members for m in union_members(text)]
    return " | ".join(union(flat, anything="Any", nothing="Never", null="None"))


class _Shapes:
    """One rendering of a schema to a given depth; remembers which ``$ref`` turned out recursive."""

    def __init__(self, root: Mapping[str, Any]) -> None:
        self.walk = Walk(root, _MAX_NODES)
        self.recursive: set[str] = set()
        self.cut = False

    def render(self, schema: Any, depth: int, refs: tuple[str, ...]) -> str:
        shape = self.walk.read(schema)
        if shape is CUT:
            self.cut = True
        if isinstance(shape, Ref):
            return self._ref(shape, depth, refs)
        if isinstance(shape, Literals):
            if not literal_values(shape.values):
                return py_union(_SIMPLE[kind] for kind in shape.kinds)
            spelled = _first(list(dict.fromkeys(repr(v) for v in shape.values if v is not None)))
            literal = [f"Literal[{', '.join(spelled)}]"] if spelled else []
            return py_union([*literal, *(["None"] if None in shape.values else [])])
        if isinstance(shape, Union):
            joined = py_union(self.render(s, depth, refs) for s in shape.members)
            return " | ".join(_first(union_members(joined)))
        if isinstance(shape, AllOf):
            return self.render(merge_all_of(shape.schema, self.walk.root), depth, refs)
        if isinstance(shape, Array) and depth > 0:
            members = shape.members
            item = py_union(self.render(s, depth - 1, refs) for s in members) if members else "Any"
            return "list" if item == "Any" else f"list[{item}]"
        if isinstance(shape, Object) and depth > 0:
            if shape.properties:
                needed = set(shape.required)
                fields = [
                    f"{_field_name(name)}{'' if name in needed else '?'}: {self.render(sub, depth - 1, refs)}"
                    for name, sub in list(shape.properties.items())[:_MAX_FIELDS]
                ]
                return "{" + ", ".join(fields + (["..."] if len(shape.properties) > _MAX_FIELDS else [])) + "}"
            if isinstance(shape.rest, Mapping) and shape.rest:
                return f"dict[str, {self.render(shape.rest, depth - 1, refs)}]"
        return _bare(shape)

    def _ref(self, ref: Ref, depth: int, refs: tuple[str, ...]) -> str:
        if ref.pointer in refs:
            self.recursive.add(ref.pointer)
            return ref.name
        if ref.target is None:
            return ref.name
        text = self.render(ref.target, depth, (*refs, ref.pointer))
        return f"{ref.name}{text}" if ref.pointer in self.recursive and text.startswith("{") else text


def _bare(shape: Shape) -> str:
    """The shape's kind alone: what a type says once its parts no longer fit."""
    if isinstance(shape, Scalar):
        return _SIMPLE[shape.kind]
    if isinstance(shape, Array):
        return "list"
    if isinstance(shape, Object):
        return "dict"
    return "Never" if shape is NOTHING else "Any"


def _first(items: list[str]) -> list[str]:
    return items[:_MAX_ENUM] + (["..."] if len(items) > _MAX_ENUM else [])


def _field_name(name: str) -> str:
    """A property name as listings show it: quoted and escaped unless it is an identifier, so an upstream's name
    cannot break a line or pass for code around it."""
    return name if name.isidentifier() else repr(name)


def union_members(text: str) -> list[str]:
    """The members of a union of Python type texts; a ``|`` inside brackets or a string literal belongs to its
    member."""
    out, depth, start, quote, escaped = [], 0, 0, "", False
    for i, ch in enumerate(text):
        if quote:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == quote:
                quote = ""
        elif ch in "'\"":
            quote = ch
        elif ch in "[{(":
            depth += 1
        elif ch in "]})":
            depth -= 1
        elif ch == "|" and depth == 0:
            out.append(text[start:i].strip())
            start = i + 1
    return [*out, text[start:].strip()]


MAX_EXTRA_NAMES = 100
"""Keyword arguments past the declared properties one call may name (for schemas that allow extra ones)."""
_SHOWN_NAMES = 10
"""Unknown argument names an error lists."""
_MB = 1024 * 1024
_UNCAPPED = 1 << 62
_YIELD_FROM = 10_000
"""Values from which a check is followed by a checkpoint, before the call goes on to serialise them."""


def count_nodes(value: Any, limit: int) -> int:
    """How many JSON values ``value`` holds, counting no further than ``limit + 1``."""
    count, stack = 0, [value]
    while stack and count <= limit:
        item = stack.pop()
        count += 1
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return count


@dataclass(frozen=True)
class ArgumentCap:
    """The most a call's arguments may take as JSON, and the config key that says so (named when refused)."""

    max_bytes: int
    key: str


class ToolSchema:
    """One tool's input schema, prepared once: property order, required names, a compiled validator."""

    def __init__(self, schema: Mapping[str, Any] | None) -> None:
        # A dict: the validator takes no other mapping for an object.
        self.schema: dict[str, Any] = dict(schema) if isinstance(schema, Mapping) else {}
        # The arguments object as the stubs and inspect read it too: through a root $ref, allOf merged.
        view = object_view(self.schema)
        self.properties: dict[str, Any] = dict(view.properties or {}) if view else {}
        self.required: list[str] = list(view.required) if view else []
        self.rest: Any = view.rest if view else None
        """The schema of arguments past the properties (``{}``: any); None when unsaid, False when refused."""
        # A declared property list is the contract: extra names are typos unless explicitly allowed.
        self.open_ended = self.rest not in (None, False) if self.properties else self.rest is not False
        self._validator: Validator | None = _UNCOMPILED

    def signature(self, name: str, returns: Mapping[str, Any] | None = None) -> str:
        """``name(a: str, b: int = 3, c: list[str] | None = None) -> {id: int}`` in schema property order.

        ``returns`` is the tool's output schema, if it declares one.
        """
        params = []
        for prop, sub in self.properties.items():
            text = f"{_field_name(prop)}: {py_type(sub, self.schema)}"
            if prop not in self.required:
                if isinstance(sub, Mapping) and "default" in sub:
                    default = repr(sub["default"])
                    text += f" = {default if len(default) <= _MAX_DEFAULT_CHARS else '...'}"
                else:
                    text += " = None" if text.endswith("None") else " | None = None"
            params.append(text)
        shape = return_type(returns)
        return f"{name}({', '.join(params)})" + (f" -> {shape}" if shape else "")

    def params(self) -> str:
        """``a, b?``: the property names in order, ``?`` after optional ones."""
        return ", ".join(f"{_field_name(p)}{'' if p in self.required else '?'}" for p in self.properties)

    async def bind(
        self,
        display: str,
        args: list[Any],
        kwargs: Mapping[str, Any],
        *,
        cap: ArgumentCap | None = None,
        budget: CheckBudget | None = None,
    ) -> dict[str, Any]:
        """Map positional and keyword arguments onto the properties and check them; what cannot be checked
        within the bounds is refused, never passed on unchecked.

        ``display`` is the signature shown in errors (``wix.get_product(...)``). Positional arguments fill the
        properties in schema order. The work is bounded whatever the snippet sends: too many names are refused
        at once; arguments past :data:`~onetool.schemas.validation.MAX_VALUES` values, past ``cap`` (the bytes the
        upstream takes; the gateway's own tools, which send nothing on, have none) or past the run's ``budget``
        are refused after a walk no longer than those caps; the rest is validated.
        """
        props = list(self.properties)
        if len(kwargs) > len(props) + MAX_EXTRA_NAMES:
            raise ArgumentError(
                f"{display} got {len(kwargs):,} keyword arguments; it accepts: {', '.join(props) or 'no arguments'}"
            )
        arguments: dict[str, Any] = dict(zip(props, args, strict=False))
        for key, value in kwargs.items():
            if key in arguments:
                raise ArgumentError(f"{display} got multiple values for argument '{key}'")
            arguments[key] = value
        self.check_shape(display, len(args), arguments)
        values, size = measure(arguments, MAX_VALUES, cap.max_bytes if cap else _UNCAPPED)
        if cap is not None and size > cap.max_bytes:
            raise ArgumentError(
                f"{display}: its arguments take more than {cap.max_bytes / _MB:,.1f} MB as JSON, the most "
                f"{cap.key} lets a call send; pass less data per call"
            )
        if values > MAX_VALUES:
            raise ArgumentError(
                f"{display}: its arguments hold more than {MAX_VALUES:,} values, more than the gateway checks in one "
                "call before it leaves; pass less data per call"
            )
        if budget is not None:
            budget.take(display, values)
        validator = self._compiled()
        problem = None if validator is None else validator.problem(arguments)
        if problem is not None:
            where, message = problem
            raise ArgumentError(f"{display}: argument {where or '(all)'!r}: {message}")
        if values > _YIELD_FROM:  # the check held the loop a while: other clients first
            await anyio.lowlevel.checkpoint()
        return arguments

    def check_shape(self, display: str, positional: int, names: Iterable[str]) -> None:
        """Too many positionals, unknown names, missing required ones: what can be seen without values."""
        props = list(self.properties)
        if positional > len(props):
            raise ArgumentError(
                f"{display} takes {len(props)} positional argument{'s' if len(props) != 1 else ''} "
                f"but {positional} were given"
            )
        given = set(props[:positional]) | set(names)
        unknown = sorted(k for k in given if k not in self.properties)
        if unknown and not self.open_ended:
            shown = ", ".join(repr(shown_name(u)) for u in unknown[:_SHOWN_NAMES])
            more = f" and {len(unknown) - _SHOWN_NAMES:,} more" if len(unknown) > _SHOWN_NAMES else ""
            raise ArgumentError(
                f"{display} got unknown argument{'s' if len(unknown) > 1 else ''} "
                f"{shown}{more}; it accepts: {', '.join(props) or 'no arguments'}"
            )
        missing = [r for r in self.required if r not in given]
        if missing:
            raise ArgumentError(
                f"{display} is missing required argument{'s' if len(missing) > 1 else ''} "
                f"{', '.join(repr(m) for m in missing)}"
            )

    def _compiled(self) -> Validator | None:
        if self._validator is _UNCOMPILED:
            self._validator = Validator.of(self.schema)
        return self._validator


_UNCOMPILED: Any = object()
