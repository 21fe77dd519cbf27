"""A JSON schema as a compact TypeScript-style type: ``{path: string, head?: integer = 10}``.

``inspect`` shows tool input schemas this way because a model reads the type as well as the JSON and it costs
a fraction of the characters. Conventions, applied everywhere:

- ``name?: T`` for an optional property, ``name: T`` for a required one; names that are not identifiers are
  quoted (``"x-id": string``).
- ``= value`` after the type shows a default (compact JSON, cut at 40 characters); a ``null`` default is
  left out, the ``?`` already says the property may be absent.
- ``/* text */`` after a property keeps its description, whitespace collapsed to one line and cut to
  ``max_description_len`` characters with ``...``; 0 drops descriptions.
- ``integer`` stays ``integer`` (not ``number``): validation rejects ``1.5`` and the model should know.
- Enums and ``const`` are unions of JSON literals (``"a" | "b"``), at most 20 members then ``| ...N more``.
- ``T[]`` arrays, ``(A | B)[]`` arrays of unions, ``[A, B]`` tuples (``[A, ...T[]]`` with more items after),
  ``Record<string, T>`` maps, ``{a: string, [key: string]: T}`` objects with extra properties, ``A & B`` for
  ``allOf``, ``T | null`` for nullable types (``null`` always last), ``{}`` for an object with no properties,
  ``object`` for any object, ``any`` for anything, ``never`` for nothing.
- ``$ref`` to ``#/...`` (``$defs``, ``definitions`` or any pointer) is expanded in place; a reference to a
  definition already being expanded (a cycle), or to one that does not exist or is not local, is shown by
  its name. What each keyword means is :mod:`onetool.schemas.walk`'s reading, the one signatures and the typed
  stubs share.
- ``...`` stands for what the caps cut: nesting deeper than ``max_depth``, more than ``max_nodes`` schema
  nodes visited, output past ``max_chars``. The caps bound time and output whatever the upstream sends.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from typing import Any

from onetool.config import DEFAULT_MAX_DESCRIPTION_LEN
from onetool.schemas.walk import (
    CUT,
    NOTHING,
    AllOf,
    Array,
    Literals,
    Object,
    Ref,
    Scalar,
    Union,
    Walk,
    description,
    union,
)
from onetool.text import one_line

__all__ = ["compress"]

_MAX_DEPTH = 12
_MAX_NODES = 2_000
_MAX_CHARS = 8_000
_MAX_LITERAL_CHARS = 40
_MAX_MEMBERS = 20
_ELIDED = "..."
_IDENT = re.compile(r"[A-Za-z_$][A-Za-z0-9_$]*\Z")


def compress(
    schema: Any,
    *,
    max_description_len: int = DEFAULT_MAX_DESCRIPTION_LEN,
    max_depth: int = _MAX_DEPTH,
    max_nodes: int = _MAX_NODES,
    max_chars: int = _MAX_CHARS,
) -> str:
    """The TypeScript-style type of ``schema`` (see the module docstring for the conventions)."""
    text = _Compressor(schema, max_description_len, max_depth, max_nodes).type_of(schema, 0)
    return text if len(text) <= max_chars else text[:max_chars] + _ELIDED


class _Compressor:
    def __init__(self, root: Any, max_description_len: int, max_depth: int, max_nodes: int) -> None:
        self._walk = Walk(root, max_nodes)
        self._max_description_len = max_description_len
        self._max_depth = max_depth
        self._compound: dict[str, tuple[str, list[str]]] = {}
        """Types rendered as a top-level union or intersection, with their operator and members: they need
        parentheses inside ``[]`` or ``&``, and a union inside a union joins it."""

    def type_of(self, schema: Any, depth: int) -> str:
        if depth > self._max_depth:
            return _ELIDED
        shape = self._walk.read(schema)
        if isinstance(shape, Ref):
            return self._ref(shape, depth)
        if isinstance(shape, Literals):
            return self._union(_literals(shape.values))
        if isinstance(shape, Union):
            return self._union([self.type_of(s, depth + 1) for s in shape.members[:_MAX_MEMBERS]])
        if isinstance(shape, AllOf):
            return self._intersection([self.type_of(s, depth + 1) for s in shape.parts[:_MAX_MEMBERS]])
        if isinstance(shape, Scalar):
            return shape.kind
        if isinstance(shape, Array):
            return self._array(shape, depth)
        if isinstance(shape, Object):
            return self._object(shape, depth)
        return _ELIDED if shape is CUT else "never" if shape is NOTHING else "any"

    def _union(self, parts: list[str]) -> str:
        flat: list[str] = []
        for part in parts:
            operator, members = self._compound.get(part, ("", [part]))
            flat += members if operator == " | " else [part]
        return self._joined(union(flat, anything="any", nothing="never", null="null"), " | ")

    def _intersection(self, parts: list[str]) -> str:
        return self._joined([self._grouped(p) for p in dict.fromkeys(parts)], " & ")

    def _joined(self, parts: list[str], operator: str) -> str:
        if len(parts) == 1:
            return parts[0]
        text = operator.join(parts)
        self._compound[text] = (operator, parts)
        return text

    def _grouped(self, text: str) -> str:
        """Parenthesise a union or intersection before ``[]`` or ``&`` binds to its last member."""
        return f"({text})" if text in self._compound else text

    def _array(self, shape: Array, depth: int) -> str:
        if shape.prefix:
            members = [self.type_of(s, depth + 1) for s in shape.prefix[:_MAX_MEMBERS]]
            if shape.rest is not None and shape.rest is not False:
                members.append(f"...{self._grouped(self.type_of(shape.rest, depth + 1))}[]")
            return "[" + ", ".join(members) + "]"
        if shape.rest is None:
            return "any[]"
        return self._grouped(self.type_of(shape.rest, depth + 1)) + "[]"

    def _object(self, shape: Object, depth: int) -> str:
        extra = shape.rest
        if shape.properties is None:
            if isinstance(extra, Mapping):
                return f"Record<string, {self.type_of(extra, depth + 1)}>"
            return "{}" if extra is False else "object"
        required = set(shape.required)
        fields: list[str] = []
        for name, prop in shape.properties.items():
            if self._walk.spent:
                fields.append(_ELIDED)
                break
            fields.append(self._property(name, prop, name in required, depth))
        if extra is not None and extra is not False:
            fields.append(f"[key: string]: {self.type_of(extra, depth + 1)}")
        return "{" + ", ".join(fields) + "}"

    def _property(self, name: str, prop: Any, required: bool, depth: int) -> str:
        key = name if _IDENT.match(name) else json.dumps(name, ensure_ascii=False)
        text = f"{key}{'' if required else '?'}: {self.type_of(prop, depth + 1)}"
        if isinstance(prop, Mapping) and prop.get("default") is not None:
            text += f" = {_literal(prop['default'])}"
        note = description(prop, self._walk.root)
        if note is not None and self._max_description_len > 0:
            text += f" /* {_comment(note, self._max_description_len)} */"
        return text

    def _ref(self, ref: Ref, depth: int) -> str:
        if ref.target is None or self._walk.cycle(ref):
            return ref.name
        # A reference is no level of nesting: the cycle check and the node cap bound chains of them.
        with self._walk.expanding(ref) as target:
            return self.type_of(target, depth)


def _literals(values: list[Any]) -> list[str]:
    shown = [_literal(v) for v in values[:_MAX_MEMBERS]]
    if len(values) > _MAX_MEMBERS:
        shown.append(f"...{len(values) - _MAX_MEMBERS} more")
    return shown or ["never"]


def _literal(value: Any) -> str:
    """Compact JSON for ``value``, cut at _MAX_LITERAL_CHARS without serialising the rest of a large value."""
    if isinstance(value, str) and len(value) > _MAX_LITERAL_CHARS:
        return json.dumps(value[:_MAX_LITERAL_CHARS] + _ELIDED, ensure_ascii=False)
    out: list[str] = []
    size = 0
    for piece in _json_pieces(value):
        out.append(piece)
        size += len(piece)
        if size > _MAX_LITERAL_CHARS:
            return "".join(out)[:_MAX_LITERAL_CHARS] + _ELIDED
    return "".join(out)


def _json_pieces(value: Any) -> Iterator[str]:
    if isinstance(value, Mapping):
        yield "{"
        for i, (k, v) in enumerate(value.items()):
            yield ("," if i else "") + json.dumps(str(k)[: _MAX_LITERAL_CHARS + 1], ensure_ascii=False) + ":"
            yield from _json_pieces(v)
        yield "}"
    elif isinstance(value, list):
        yield "["
        for i, v in enumerate(value):
            if i:
                yield ","
            yield from _json_pieces(v)
        yield "]"
    elif isinstance(value, str):
        yield json.dumps(value[: _MAX_LITERAL_CHARS + 1], ensure_ascii=False)
    else:
        yield json.dumps(value)


def _comment(text: str, limit: int) -> str:
    """One line of ``text`` that cannot close the comment it sits in, cut at ``limit`` characters."""
    return one_line(text, limit).replace("*/", "*\\/")
