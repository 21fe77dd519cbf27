"""JSON schemas and Python annotations as Python type expressions, and the TypedDicts they need.

Expressions are built as text in which every name the module defines itself is a placeholder: a typing or
builtin name is ``\\x01str\\x01``, a TypedDict is ``\\x02<id>\\x02``. Names are chosen only once the whole module is
known (:mod:`onetool.stubs._module`), so that none clashes with a pack, tool or field name from upstream. Neither
placeholder byte can come from upstream text: every upstream string enters as ``repr()`` or escaped.
"""

from __future__ import annotations

import collections.abc
import keyword
import re
import types
import typing
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import TypeAdapter
from pydantic.json_schema import JsonSchemaMode as JsonMode

from onetool.registry.schema import literal_values, union_members
from onetool.schemas.walk import NOTHING, AllOf, Array, Literals, Object, Ref, Scalar, Union, merge_all_of, read, union

MAX_NODES = 2_000
"""Subschemas one tool's types visit: bounds the work (and the module) a hostile schema can cause."""
_MAX_DEPTH = 24
"""Nesting followed; deeper is ``Any`` (and Python's recursion limit is never near)."""

_JSON_KINDS = {"string": "str", "integer": "int", "number": "float", "boolean": "bool"}
_PLAIN_CLASSES = (str, int, float, bool, bytes, object)
_SEQUENCES = (
    list,
    tuple,
    set,
    frozenset,
    collections.abc.Sequence,
    collections.abc.MutableSequence,
    collections.abc.Iterable,
    collections.abc.Collection,
    collections.abc.Set,
)
_MAPPINGS = (dict, collections.abc.Mapping, collections.abc.MutableMapping)
_PLACEHOLDER = re.compile("\x01(\\w+)\x01|\x02(\\d+)\x02")


def vocab(name: str) -> str:
    """A typing or builtin name, as a placeholder."""
    return f"\x01{name}\x01"


ANY = vocab("Any")
_LITERAL_KINDS = {
    **{kind: vocab(name) for kind, name in _JSON_KINDS.items()},
    "null": "None",
    "array": f"{vocab('list')}[{ANY}]",
    "object": f"{vocab('dict')}[{vocab('str')}, {ANY}]",
}
"""The type of enum values that cannot be a ``Literal``, by their JSON type."""


def placeholders(text: str) -> Iterable[re.Match[str]]:
    return _PLACEHOLDER.finditer(text)


def substitute(text: str, names: Mapping[str, str], classes: Mapping[int, str]) -> str:
    """``text`` with its placeholders replaced by the names chosen for them."""
    return _PLACEHOLDER.sub(lambda m: names[m[1]] if m[1] else classes[int(m[2])], text)


def pascal(text: Any) -> str:
    """``get_current_time`` -> ``GetCurrentTime``; an identifier made of ASCII letters and digits, or ``""``."""
    if not isinstance(text, str):
        return ""
    words = re.sub("[^0-9A-Za-z]+", " ", text.replace("_", " ")).split()
    name = "".join(w[0].upper() + w[1:] for w in words)[:60]
    return "T" + name if name[:1].isdigit() else name


def plain_name(name: str) -> bool:
    """Whether ``name`` can be written as itself in a class body: a parameter or a TypedDict field.

    ``__x`` is excluded: Python mangles it in a class body, and type checkers take such a parameter as positional-only.
    """
    return name.isidentifier() and not keyword.iskeyword(name) and not name.startswith("__")


@dataclass
class TypedDictSpec:
    preferred: str
    fields: list[tuple[str, str, bool]]
    """(key, type expression, required)"""
    doc: str

    @property
    def functional(self) -> bool:
        """Written as ``X = TypedDict("X", {...})``: some key cannot be a class-body name."""
        return not all(plain_name(key) for key, _, _ in self.fields)


class TypeBuilder:
    """Types for one module: remembers the TypedDicts made so far, shares identical ones, and resolves ``$ref``s."""

    def __init__(self) -> None:
        self.dicts: list[TypedDictSpec | None] = []
        self.alias: dict[int, int] = {}
        """A TypedDict dropped for an identical earlier one -> that one."""
        self.field_names: set[str] = set()
        """Keys of class-syntax TypedDicts: names in a class body, which no name the module uses may equal."""
        self._by_body: dict[tuple[bool, tuple[tuple[str, str, bool], ...]], int] = {}
        self._done: dict[tuple[int, str], str] = {}
        self._open: dict[tuple[int, str], int | None] = {}
        self._budget = MAX_NODES

    def new_tool(self) -> None:
        self._budget = MAX_NODES

    # ---- JSON schema ---------------------------------------------------------------------------------------

    def json(self, schema: Any, root: Mapping[str, Any], hint: str, depth: int = 0) -> str:
        """The type of values ``schema`` describes; ``hint`` names a TypedDict it needs (unless the schema does)."""
        self._budget -= 1
        if self._budget < 0 or depth > _MAX_DEPTH:
            return ANY
        shape = read(schema, root)
        if isinstance(shape, Ref):
            return self._ref(shape, root, depth)
        if isinstance(shape, Literals):
            lit = self.literal(shape.values)
            return lit if lit else self.union(_LITERAL_KINDS[kind] for kind in shape.kinds)
        if isinstance(shape, Union):
            return self.union(self.json(s, root, hint, depth + 1) for s in shape.members)
        if isinstance(shape, AllOf):
            return self.json(merge_all_of(shape.schema, root), root, hint, depth + 1)
        if isinstance(shape, Scalar):
            return "None" if shape.kind == "null" else vocab(_JSON_KINDS[shape.kind])
        if isinstance(shape, Array):
            members = shape.members
            item = self.union(self.json(s, root, hint + "Item", depth + 1) for s in members) if members else ANY
            return f"{vocab('list')}[{item}]"
        if isinstance(shape, Object):
            if shape.properties:
                return self.typed_dict(shape, root, hint, depth)
            extra = shape.rest
            value = self.json(extra, root, hint + "Value", depth + 1) if isinstance(extra, Mapping) and extra else ANY
            return f"{vocab('dict')}[{vocab('str')}, {value}]"
        return vocab("Never") if shape is NOTHING else ANY

    def typed_dict(self, shape: Object, root: Mapping[str, Any], hint: str, depth: int, cid: int | None = None) -> str:
        """A TypedDict for an object schema with properties; ``cid`` is the id a recursive ``$ref`` reserved."""
        needed = set(shape.required)
        fields = [
            (key, self.json(sub, root, hint + pascal(key), depth + 1), key in needed)
            for key, sub in (shape.properties or {}).items()
        ]
        if self._budget < 0:
            return f"{vocab('dict')}[{vocab('str')}, {ANY}]"
        description = shape.schema.get("description")
        doc = description if isinstance(description, str) else ""
        return self._register(TypedDictSpec(pascal(shape.schema.get("title")) or hint, fields, doc), cid)

    def _register(self, spec: TypedDictSpec, cid: int | None = None) -> str:
        """The placeholder of ``spec``, or of an identical TypedDict made before."""
        fields = spec.fields
        body = (spec.functional, tuple(fields))
        same = self._by_body.get(body)
        if same is not None:
            if cid is not None:
                self.alias[cid] = same
            return f"\x02{same}\x02"
        if cid is None:
            cid = len(self.dicts)
            self.dicts.append(None)
        self.dicts[cid] = spec
        self._by_body[body] = cid
        if not spec.functional:
            self.field_names.update(key for key, _, _ in fields)
        return f"\x02{cid}\x02"

    def _ref(self, ref: Ref, root: Mapping[str, Any], depth: int) -> str:
        key = (id(root), ref.pointer)
        if key in self._done:
            return self._done[key]
        if key in self._open:
            cid = self._open[key]
            # A recursive object is named; a recursive anything-else would need a type alias: Any.
            return ANY if cid is None else f"\x02{cid}\x02"
        if ref.target is None:
            return ANY
        hint = pascal(ref.name) or "Ref"
        target = read(ref.target, root)
        if isinstance(target, Object) and target.properties:
            cid = self._open[key] = len(self.dicts)
            self.dicts.append(None)
            text = self.typed_dict(target, root, hint, depth + 1, cid)
        else:
            self._open[key] = None
            text = self.json(ref.target, root, hint, depth + 1)
        del self._open[key]
        self._done[key] = text
        return text

    # ---- Python annotations ----------------------------------------------------------------------------------

    def python(self, tp: Any, hint: str, mode: JsonMode = "validation", depth: int = 0) -> str:
        """The type of a local tool's parameter (``validation``) or return (``serialization``) annotation, already
        resolved; Any when it cannot be said."""
        if depth > _MAX_DEPTH or tp is Any:
            return ANY
        if tp is None or tp is type(None):
            return "None"
        if tp in _PLAIN_CLASSES:
            return vocab(tp.__name__)
        origin, args = typing.get_origin(tp), typing.get_args(tp)
        if origin is typing.Union or origin is types.UnionType:
            return self.union(self.python(a, hint, mode, depth + 1) for a in args)
        if origin is typing.Literal:
            return self.literal(list(args)) or ANY
        if origin is typing.Annotated:
            return self.python(args[0], hint, mode, depth + 1)
        if tp in _SEQUENCES or origin in _SEQUENCES:
            item = self.union(self.python(a, hint + "Item", mode, depth + 1) for a in args if a is not Ellipsis)
            return f"{vocab('list')}[{item if args else ANY}]"
        if tp in _MAPPINGS or origin in _MAPPINGS:
            key, value = (
                (self.python(a, hint, mode, depth + 1) for a in args) if len(args) == 2 else (vocab("str"), ANY)
            )
            return f"{vocab('dict')}[{key}, {value}]"
        if typing.is_typeddict(tp):
            # pydantic refuses typing.TypedDict before Python 3.12; its fields are plain annotations anyway.
            try:
                hints = typing.get_type_hints(tp)
            except Exception:
                return ANY
            required = getattr(tp, "__required_keys__", frozenset(hints))
            fields = [(k, self.python(t, hint + pascal(k), mode, depth + 1), k in required) for k, t in hints.items()]
            return self._register(TypedDictSpec(pascal(tp.__name__) or hint, fields, tp.__doc__ or ""))
        if isinstance(tp, type):
            # A model, dataclass, TypedDict or enum crosses to the snippet as its JSON form.
            try:
                schema = TypeAdapter(tp).json_schema(mode=mode)
            except Exception:
                return ANY
            return self.json(schema, schema, pascal(tp.__name__) or hint, depth + 1)
        return ANY

    # ---- shared ------------------------------------------------------------------------------------------------

    def literal(self, values: list[Any]) -> str | None:
        """``Literal[...]`` of JSON scalar values (None joins as ``| None``); None when they cannot be spelled so."""
        if not values or not literal_values(values):
            return None
        spelled = list(dict.fromkeys(repr(v) for v in values if v is not None))
        parts = [f"{vocab('Literal')}[{', '.join(spelled)}]"] if spelled else []
        return self.union([*parts, *(["None"] if None in values else [])])

    @staticmethod
    def union(parts: Iterable[str]) -> str:
        members = [m for part in parts for m in union_members(part)]
        if not members:
            return ANY
        return " | ".join(union(members, anything=ANY, nothing=vocab("Never"), null="None"))
