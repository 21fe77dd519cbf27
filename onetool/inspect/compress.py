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
- ``T[]`` arrays, ``(A | B)[]`` arrays of unions, ``[A, B]`` tuples, ``Record<string, T>`` maps,
  ``{a: string, [key: string]: T}`` objects with extra properties, ``A & B`` for ``allOf``, ``T | null`` for
  nullable types, ``{}`` for an object with no properties, ``object`` for any object, ``any`` for anything.
- ``$ref`` to ``#/...`` (``$defs``, ``definitions`` or any pointer) is expanded in place; a reference to a
  definition already being expanded (a cycle), or to one that does not exist or is not local, is shown by
  its name.
- ``...`` stands for what the caps cut: nesting deeper than ``max_depth``, more than ``max_nodes`` schema
  nodes visited, output past ``max_chars``. The caps bound time and output whatever the upstream sends.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from typing import Any
from urllib.parse import unquote

from onetool.config import DEFAULT_MAX_DESCRIPTION_LEN
from onetool.text import one_line

__all__ = ["compress"]

_MAX_DEPTH = 12
_MAX_NODES = 2_000
_MAX_CHARS = 8_000
_MAX_LITERAL_CHARS = 40
_MAX_MEMBERS = 20
_ELIDED = "..."
_IDENT = re.compile(r"[A-Za-z_$][A-Za-z0-9_$]*\Z")
_PRIMITIVES = frozenset({"string", "integer", "number", "boolean", "null"})


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
        self._root = root
        self._max_description_len = max_description_len
        self._max_depth = max_depth
        self._nodes_left = max_nodes
        self._compound: set[str] = set()
        """Types rendered as a top-level union or intersection: they need parentheses inside ``[]`` or ``&``."""
        self._expanding: list[str] = []
        """The references being expanded, innermost last: meeting one of them again is a cycle."""

    def type_of(self, schema: Any, depth: int) -> str:
        if depth > self._max_depth or self._nodes_left <= 0:
            return _ELIDED
        self._nodes_left -= 1
        if schema is True or (isinstance(schema, Mapping) and not schema):
            return "any"
        if schema is False:
            return "never"
        if not isinstance(schema, Mapping):
            return "any"
        if isinstance(schema.get("$ref"), str):
            return self._ref(schema["$ref"], depth)
        text = self._base(schema, depth)
        if schema.get("nullable") is True and text not in ("any", "null"):
            text = self._union([text, "null"])
        return text

    def _union(self, parts: list[str]) -> str:
        flat = list(dict.fromkeys(parts))
        return "any" if "any" in flat else self._joined(flat, " | ")

    def _intersection(self, parts: list[str]) -> str:
        return self._joined([self._grouped(p) for p in dict.fromkeys(parts)], " & ")

    def _joined(self, parts: list[str], operator: str) -> str:
        if len(parts) == 1:
            return parts[0]
        text = operator.join(parts)
        self._compound.add(text)
        return text

    def _grouped(self, text: str) -> str:
        """Parenthesise a union or intersection before ``[]`` or ``&`` binds to its last member."""
        return f"({text})" if text in self._compound else text

    def _base(self, schema: Mapping[str, Any], depth: int) -> str:
        if isinstance(schema.get("enum"), list):
            return self._union(_literals(schema["enum"]))
        if "const" in schema:
            return _literal(schema["const"])
        for key in ("anyOf", "oneOf"):
            if isinstance(schema.get(key), list) and schema[key]:
                return self._union([self.type_of(s, depth + 1) for s in schema[key][:_MAX_MEMBERS]])
        if isinstance(schema.get("allOf"), list) and schema["allOf"]:
            return self._intersection([self.type_of(s, depth + 1) for s in schema["allOf"][:_MAX_MEMBERS]])
        kind = schema.get("type")
        if isinstance(kind, list):
            return self._union([self._typed(str(k), schema, depth) for k in kind[:_MAX_MEMBERS]])
        if isinstance(kind, str):
            return self._typed(kind, schema, depth)
        # No type: infer it from the keywords present, as validators effectively do.
        if "properties" in schema or "additionalProperties" in schema:
            return self._object(schema, depth)
        if "items" in schema or "prefixItems" in schema:
            return self._array(schema, depth)
        return "any"

    def _typed(self, kind: str, schema: Mapping[str, Any], depth: int) -> str:
        if kind == "object":
            return self._object(schema, depth)
        if kind == "array":
            return self._array(schema, depth)
        return kind if kind in _PRIMITIVES else "any"

    def _array(self, schema: Mapping[str, Any], depth: int) -> str:
        items = schema.get("prefixItems", schema.get("items"))
        if isinstance(items, list):
            return "[" + ", ".join(self.type_of(s, depth + 1) for s in items[:_MAX_MEMBERS]) + "]"
        if items is None:
            return "any[]"
        return self._grouped(self.type_of(items, depth + 1)) + "[]"

    def _object(self, schema: Mapping[str, Any], depth: int) -> str:
        props = schema.get("properties")
        extra = schema.get("additionalProperties")
        if not isinstance(props, Mapping):
            if isinstance(extra, Mapping) or extra is True:
                return f"Record<string, {self.type_of(extra, depth + 1)}>"
            return "{}" if extra is False else "object"
        listed = schema.get("required")
        required = {r for r in listed if isinstance(r, str)} if isinstance(listed, list) else set()
        fields: list[str] = []
        for name, prop in props.items():
            if self._nodes_left <= 0:
                fields.append(_ELIDED)
                break
            fields.append(self._property(str(name), prop, name in required, depth))
        if isinstance(extra, Mapping) and extra:
            fields.append(f"[key: string]: {self.type_of(extra, depth + 1)}")
        return "{" + ", ".join(fields) + "}"

    def _property(self, name: str, prop: Any, required: bool, depth: int) -> str:
        key = name if _IDENT.match(name) else json.dumps(name, ensure_ascii=False)
        text = f"{key}{'' if required else '?'}: {self.type_of(prop, depth + 1)}"
        if not isinstance(prop, Mapping):
            return text
        if prop.get("default") is not None:
            text += f" = {_literal(prop['default'])}"
        description = prop.get("description")
        if not isinstance(description, str) and isinstance(prop.get("$ref"), str):
            target = self._resolve(prop["$ref"])
            description = target.get("description") if isinstance(target, Mapping) else None
        if isinstance(description, str) and self._max_description_len > 0:
            text += f" /* {_comment(description, self._max_description_len)} */"
        return text

    def _ref(self, ref: str, depth: int) -> str:
        name = _ref_name(ref)
        target = self._resolve(ref)
        if target is None or ref in self._expanding:
            return name
        self._expanding.append(ref)
        try:
            # A reference is no level of nesting: the cycle check and the node cap bound chains of them.
            return self.type_of(target, depth)
        finally:
            self._expanding.pop()

    def _resolve(self, ref: str) -> Any:
        """The schema a local ``#/...`` pointer names, or None."""
        if not ref.startswith("#"):
            return None
        node = self._root
        for raw in ref[1:].split("/")[1:]:
            part = unquote(raw).replace("~1", "/").replace("~0", "~")
            if isinstance(node, Mapping) and part in node:
                node = node[part]
            elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
                node = node[int(part)]
            else:
                return None
        return node


def _ref_name(ref: str) -> str:
    tail = ref.rstrip("/").rsplit("/", 1)[-1]
    return one_line(unquote(tail), 64).replace(" ", "") or "any"


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
