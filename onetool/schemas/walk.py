"""The one reading of a JSON schema that argument binding, the typed stubs and ``inspect``'s compression share.

Each of them turns a tool's schema into something else (a Python signature, a stubs module, a TypeScript-style
type); none of them interprets keywords itself. :func:`read` says what one schema node describes, as one of a few
shapes whose subschemas are left unread; the consumer recurses by reading those in turn, so each keeps its own
output and caps while the meaning of every keyword is decided here, once:

- ``true`` and ``{}`` are anything, ``false`` and ``enum: []`` are nothing; a schema that is not a JSON object or
  boolean is malformed and read as anything (the upstream judges what it meant).
- ``nullable: true`` (OpenAPI 3.0, which many MCP servers are generated from) adds ``null``: the schema reads as a
  union with ``{"type": "null"}``, and :mod:`onetool.registry.schema` validates it so.
- ``$ref`` to a local JSON pointer (``#/$defs/X``, ``#/definitions/X``, percent- and ``~``-escaped) resolves
  against the document's root; a remote or dangling one is known by its name only. Keywords beside ``$ref`` are
  not read (most generators put only annotations there).
- Then, first match wins: ``enum``, ``const``, ``anyOf``/``oneOf`` (both a union: exclusivity cannot be typed),
  ``allOf``, ``type`` (a list of types is a union of the same schema with each one), and without ``type`` the
  kind the keywords imply: ``properties``/``additionalProperties`` an object, ``items``/``prefixItems`` an array.
- Arrays: ``prefixItems`` (or draft 7's ``items: [...]``) are the leading members, ``items`` (draft 7:
  ``additionalItems``) the rest. Objects: ``properties``, the string names in ``required``, and
  ``additionalProperties`` as the rest.

:class:`Walk` adds what every traversal needs on top: a budget of nodes (a hostile schema's expansion is cut, not
followed) and the ``$ref`` chain being expanded (a cycle is seen, not followed).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote

from onetool.text import one_line

__all__ = [
    "ANYTHING",
    "CUT",
    "NOTHING",
    "AllOf",
    "Array",
    "Literals",
    "Narrowed",
    "Object",
    "Ref",
    "Scalar",
    "Shape",
    "Special",
    "Union",
    "Walk",
    "description",
    "merge_all_of",
    "object_view",
    "read",
    "resolve_ref",
    "union",
]

NULL: Mapping[str, Any] = {"type": "null"}
SCALARS = frozenset({"string", "integer", "number", "boolean", "null"})
KINDS = SCALARS | {"array", "object"}
"""The JSON types: a ``type`` list naming anything else reads as anything (and holds at most these seven)."""
_MAX_REF_HOPS = 32
"""``$ref``s followed to find the object a tool's arguments are: a chain longer than this is not an object."""


@dataclass(frozen=True, slots=True)
class Special:
    """A shape without parts: anything, nothing, or what a budget cut."""

    name: str


ANYTHING = Special("anything")
NOTHING = Special("nothing")
CUT = Special("cut")
"""What :meth:`Walk.read` returns once the budget is spent; each consumer shows it its own way."""


@dataclass(frozen=True, slots=True)
class Ref:
    """A ``$ref``; ``target`` is the schema it names, None when it names nothing here (dangling or remote)."""

    pointer: str
    name: str
    target: Any


@dataclass(frozen=True, slots=True)
class Literals:
    """``enum`` or ``const``: these JSON values and no others (never empty: no value at all is NOTHING)."""

    values: list[Any]

    @property
    def kinds(self) -> list[str]:
        """The JSON types of the values (``"string"``, ...): their type where an output cannot list them one by one."""
        return list(dict.fromkeys(_KIND_OF.get(type(v), "object") for v in self.values))


@dataclass(frozen=True, slots=True)
class Union:
    """A value any one of ``members`` describes (``anyOf``, ``oneOf``, a ``type`` list, ``nullable``)."""

    members: list[Any]


@dataclass(frozen=True, slots=True)
class AllOf:
    """A value every one of ``parts`` describes."""

    parts: list[Any]
    schema: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class Scalar:
    """``string``, ``integer``, ``number``, ``boolean`` or ``null``."""

    kind: str


@dataclass(frozen=True, slots=True)
class Array:
    """A JSON array: ``prefix`` describes its leading members in order, ``rest`` the others.

    ``rest`` is a schema, None when the schema says nothing about them, or False when there may be none.
    """

    prefix: list[Any]
    rest: Any

    @property
    def members(self) -> list[Any]:
        """The schemas of its members, for outputs that type an array by one member type: ``prefix``, then ``rest``
        when it allows some."""
        return [*self.prefix, *([] if self.rest is None or self.rest is False else [self.rest])]


@dataclass(frozen=True, slots=True)
class Object:
    """A JSON object: ``properties`` (None when the schema lists none, ``{}`` when it lists an empty set), the
    ``required`` names (in order, each once), and ``rest``, the schema of other keys (None when unsaid, False when
    there may be none)."""

    properties: Mapping[str, Any] | None
    required: tuple[str, ...]
    rest: Any
    schema: Mapping[str, Any] = field(repr=False)


Shape = Special | Ref | Literals | Union | AllOf | Scalar | Array | Object
_KIND_OF = {str: "string", bool: "boolean", int: "integer", float: "number", type(None): "null", list: "array"}


@dataclass(frozen=True, slots=True)
class Narrowed:
    """A member of a union :func:`read` made from one schema: the schema without its ``nullable``, or as one type of
    its ``type`` list (``kind``). A reference, not a copy: a large schema named many times is never copied."""

    schema: Mapping[str, Any]
    kind: str | None


def read(schema: Any, root: Any) -> Shape:
    """What ``schema`` describes (see the module docstring); a ``$ref`` in it resolves against ``root``."""
    if isinstance(schema, Narrowed):
        return _kind(schema.schema, schema.kind) if schema.kind is not None else _read(schema.schema, root)
    if schema is False:
        return NOTHING
    if not isinstance(schema, Mapping):
        return ANYTHING
    if schema.get("nullable") is True:
        return Union([Narrowed(schema, None), NULL])
    return _read(schema, root)


def _read(schema: Mapping[str, Any], root: Any) -> Shape:
    ref = schema.get("$ref")
    if isinstance(ref, str):
        return Ref(ref, ref_name(ref), resolve_ref(root, ref))
    if isinstance(schema.get("enum"), list) or "const" in schema:
        values = schema["enum"] if isinstance(schema.get("enum"), list) else [schema["const"]]
        return Literals(values) if values else NOTHING
    for key in ("anyOf", "oneOf"):
        if isinstance(schema.get(key), list) and schema[key]:
            return Union(schema[key])
    if isinstance(schema.get("allOf"), list) and schema["allOf"]:
        return AllOf(schema["allOf"], schema)
    kind = schema.get("type")
    if isinstance(kind, list) and kind:
        kinds = list(dict.fromkeys(kind if all(isinstance(k, str) and k in KINDS for k in kind) else [""]))
        return _kind(schema, kinds[0]) if len(kinds) == 1 else Union([Narrowed(schema, k) for k in kinds])
    if isinstance(kind, str):
        return _kind(schema, kind)
    if kind is not None:
        return ANYTHING
    if "properties" in schema or "additionalProperties" in schema:
        return _kind(schema, "object")
    if "items" in schema or "prefixItems" in schema:
        return _kind(schema, "array")
    return ANYTHING


def _kind(schema: Mapping[str, Any], kind: str) -> Shape:
    if kind in SCALARS:
        return Scalar(kind)
    if kind == "array":
        prefix, rest = schema.get("prefixItems"), schema.get("items")
        if not isinstance(prefix, list) and isinstance(rest, list):
            prefix, rest = rest, schema.get("additionalItems")  # draft 7's tuple form
        return Array(prefix if isinstance(prefix, list) else [], _rest(rest))
    if kind == "object":
        props = schema.get("properties")
        listed = schema.get("required")
        return Object(
            props if isinstance(props, Mapping) else None,
            tuple(dict.fromkeys(r for r in listed if isinstance(r, str))) if isinstance(listed, list) else (),
            _rest(schema.get("additionalProperties")),
            schema,
        )
    return ANYTHING


def _rest(value: Any) -> Any:
    """``items``/``additionalProperties``: False stays False (none allowed), absent is None, True is ``{}``."""
    if value is None or value is False:
        return value
    return {} if value is True else value


def union(members: Iterable[str], *, anything: str, nothing: str, null: str) -> list[str]:
    """The members of a union as every output spells it, given their texts: each once, ``anything`` absorbing the
    others, ``nothing`` adding nothing, ``null`` last (so ``str | None`` reads the same whatever the order given)."""
    seen = list(dict.fromkeys(members))
    if anything in seen:
        return [anything]
    kept = [m for m in seen if m not in (nothing, null)] + ([null] if null in seen else [])
    return kept or [nothing]


def resolve_ref(root: Any, ref: str) -> Any:
    """The subschema a local JSON pointer (``#/$defs/Item``) names in ``root``; None when it names nothing.

    The pointer sits in a URI fragment: percent-escapes are decoded, then ``~1`` and ``~0``. Remote references are
    not followed.
    """
    if not ref.startswith("#"):
        return None
    node = root
    for raw in ref[1:].split("/")[1:]:
        part = unquote(raw).replace("~1", "/").replace("~0", "~")
        if isinstance(node, Mapping) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            return None
    return node


def ref_name(ref: str) -> str:
    """What a ``$ref`` is called where it is shown by name: the pointer's last part (``Root`` for ``#``)."""
    tail = unquote(ref.rstrip("/").rsplit("/", 1)[-1]).replace("~1", "/").replace("~0", "~")
    return one_line(tail.lstrip("#"), 64).replace(" ", "") or "Root"


def description(schema: Any, root: Any) -> str | None:
    """The schema's ``description``, or else that of the schema its ``$ref`` names."""
    if not isinstance(schema, Mapping):
        return None
    text = schema.get("description")
    if not isinstance(text, str) and isinstance(schema.get("$ref"), str):
        target = resolve_ref(root, schema["$ref"])
        text = target.get("description") if isinstance(target, Mapping) else None
    return text if isinstance(text, str) else None


def merge_all_of(schema: Mapping[str, Any], root: Any) -> dict[str, Any]:
    """``allOf`` as one schema, for outputs that cannot spell an intersection (Python types): the parts'
    properties and required names together (what pydantic emits), other keywords from the first that has them."""
    merged: dict[str, Any] = {k: v for k, v in schema.items() if k != "allOf"}
    props: dict[str, Any] = dict(merged.get("properties") or {})
    required: list[Any] = list(merged.get("required") or [])
    for part in schema["allOf"]:
        if isinstance(part, Mapping) and isinstance(part.get("$ref"), str):
            part = resolve_ref(root, part["$ref"])
        if not isinstance(part, Mapping):
            continue
        if isinstance(part.get("properties"), Mapping):
            props.update(part["properties"])
        if isinstance(part.get("required"), list):
            required += part["required"]
        for key, value in part.items():
            if key not in ("allOf", "$ref"):
                merged.setdefault(key, value)
    if props:
        merged.update(properties=props, required=required, type=merged.get("type", "object"))
    return merged


def object_view(schema: Any) -> Object | None:
    """The object a tool's input schema describes, following ``$ref``s and merging ``allOf`` as :func:`read`
    does; None when it describes no object with a known shape (anything at all, a union, a scalar)."""
    node = schema
    for _ in range(_MAX_REF_HOPS):
        shape = read(node, schema)
        if isinstance(shape, Object):
            return shape
        if isinstance(shape, Ref) and shape.target is not None:
            node = shape.target
        elif isinstance(shape, AllOf):
            node = merge_all_of(shape.schema, schema)
        else:
            return None
    return None


class Walk:
    """One traversal of a schema document: reads nodes against its root while a budget of nodes lasts, and
    knows which ``$ref``s it is inside of."""

    def __init__(self, root: Any, max_nodes: int) -> None:
        self.root = root
        self.nodes_left = max_nodes
        self._expanding: list[str] = []

    @property
    def spent(self) -> bool:
        return self.nodes_left <= 0

    def read(self, schema: Any) -> Shape:
        """What ``schema`` describes, or CUT once the budget is spent (each call spends one node)."""
        if self.nodes_left <= 0:
            return CUT
        self.nodes_left -= 1
        return read(schema, self.root)

    def cycle(self, ref: Ref) -> bool:
        """Whether ``ref`` is being expanded already: expanding it again would never end."""
        return ref.pointer in self._expanding

    @contextmanager
    def expanding(self, ref: Ref) -> Iterator[Any]:
        """Inside ``ref``'s target, which the block gets."""
        self._expanding.append(ref.pointer)
        try:
            yield ref.target
        finally:
            self._expanding.pop()
