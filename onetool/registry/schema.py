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
from typing import Any

from jsonschema import exceptions as js_exceptions
from jsonschema import validators

from onetool.errors import ArgumentError
from onetool.results import is_envelope_schema

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
        if len(text) <= MAX_TYPE_CHARS and shapes.nodes >= 0:
            return text
    kind = schema.get("type") if isinstance(schema, Mapping) else None
    return _SIMPLE.get(kind, "Any") if isinstance(kind, str) else "Any"


def return_type(output_schema: Mapping[str, Any] | None) -> str | None:
    """What a tool returns, from its output schema; the Python SDK's ``{"result": X}`` envelope shows as ``X``.

    None when the tool declares no output schema (its result is then whatever data its content holds).
    """
    if not isinstance(output_schema, Mapping) or not output_schema:
        return None
    if is_envelope_schema(output_schema):
        return py_type(output_schema["properties"]["result"], output_schema)
    return py_type(output_schema)


class _Shapes:
    """One rendering of a schema to a given depth; remembers which ``$ref`` turned out recursive."""

    def __init__(self, root: Mapping[str, Any]) -> None:
        self.root = root
        self.recursive: set[str] = set()
        self.nodes = _MAX_NODES

    def render(self, schema: Any, depth: int, refs: tuple[str, ...]) -> str:
        self.nodes -= 1
        if not isinstance(schema, Mapping) or self.nodes < 0:
            return "Any"
        ref = schema.get("$ref")
        if isinstance(ref, str):
            return self._ref(ref, depth, refs)
        if isinstance(schema.get("enum"), list):
            return "Literal[" + ", ".join(_first([repr(v) for v in schema["enum"]])) + "]"
        if "const" in schema:
            return f"Literal[{schema['const']!r}]"
        for key in ("anyOf", "oneOf"):
            if isinstance(schema.get(key), list) and schema[key]:
                return " | ".join(_first(list(dict.fromkeys(self.render(s, depth, refs) for s in schema[key]))))
        if isinstance(schema.get("allOf"), list) and schema["allOf"]:
            return self.render(merge_all_of(schema, self.root), depth, refs)
        kind = schema.get("type")
        if isinstance(kind, list):
            return " | ".join(dict.fromkeys(self._kind(schema, k, depth, refs) for k in kind))
        if kind is None:
            kind = "object" if "properties" in schema else "array" if "items" in schema else None
        return self._kind(schema, kind, depth, refs)

    def _kind(self, schema: Mapping[str, Any], kind: Any, depth: int, refs: tuple[str, ...]) -> str:
        if kind == "array":
            items = schema.get("items")
            if depth <= 0 or not isinstance(items, Mapping) or not items:
                return "list"
            return f"list[{self.render(items, depth - 1, refs)}]"
        if kind == "object" and depth > 0:
            props = schema.get("properties")
            if isinstance(props, Mapping) and props:
                required = schema.get("required")
                needed = set(required) if isinstance(required, list) else set()
                fields = [
                    f"{_field_name(name)}{'' if name in needed else '?'}: {self.render(sub, depth - 1, refs)}"
                    for name, sub in list(props.items())[:_MAX_FIELDS]
                ]
                return "{" + ", ".join(fields + (["..."] if len(props) > _MAX_FIELDS else [])) + "}"
            extra = schema.get("additionalProperties")
            if isinstance(extra, Mapping) and extra:
                return f"dict[str, {self.render(extra, depth - 1, refs)}]"
        return _SIMPLE.get(kind, "Any") if isinstance(kind, str) else "Any"

    def _ref(self, ref: str, depth: int, refs: tuple[str, ...]) -> str:
        name = ref.rsplit("/", 1)[-1].lstrip("#") or "Root"
        if ref in refs:
            self.recursive.add(ref)
            return name
        target = resolve_ref(self.root, ref)
        if target is None:
            return name
        text = self.render(target, depth, (*refs, ref))
        return f"{name}{text}" if ref in self.recursive and text.startswith("{") else text


def resolve_ref(root: Mapping[str, Any], ref: str) -> Any:
    """The subschema a local JSON pointer (``#/$defs/Item``) names in ``root``; None when it names nothing.

    Remote references are not followed.
    """
    if not ref.startswith("#"):
        return None
    node: Any = root
    for part in ref[1:].split("/")[1:]:
        key = part.replace("~1", "/").replace("~0", "~")
        if isinstance(node, Mapping) and key in node:
            node = node[key]
        elif isinstance(node, list) and key.isdigit() and int(key) < len(node):
            node = node[int(key)]
        else:
            return None
    return node


def merge_all_of(schema: Mapping[str, Any], root: Mapping[str, Any]) -> dict[str, Any]:
    """``allOf`` as one schema: the parts' properties and required names together (what pydantic emits)."""
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


def _first(items: list[str]) -> list[str]:
    return items[:_MAX_ENUM] + (["..."] if len(items) > _MAX_ENUM else [])


def _field_name(name: str) -> str:
    return name if name.isidentifier() else repr(name)


MAX_CHECKED_VALUES = 500
"""Arguments of up to this many JSON values are checked against the input schema, on the event loop: a few
milliseconds at most. Larger ones go to the upstream unchecked, which validates them itself: the check is
friendliness, not a trust boundary, and its cost must not grow with what a snippet sends."""
MAX_CHECKED_CHARS = 64 * 1024
"""Characters of strings in checked arguments: a schema's ``pattern`` runs over each one."""
MAX_EXTRA_NAMES = 100
"""Keyword arguments past the declared properties one call may name (for schemas that allow extra ones)."""
_SHOWN_NAMES = 10
"""Unknown argument names an error lists."""


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


def checkable(arguments: Mapping[str, Any]) -> bool:
    """Whether checking these arguments costs a bounded few milliseconds (MAX_CHECKED_VALUES, _CHARS)."""
    count, chars, stack = 0, 0, [*arguments.keys(), *arguments.values()]
    while stack:
        item = stack.pop()
        count += 1
        if isinstance(item, str):
            chars += len(item)
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
        if count > 2 * MAX_CHECKED_VALUES or chars > MAX_CHECKED_CHARS:
            return False
    return True


def _validate(validator: Any, display: str, arguments: dict[str, Any]) -> None:
    error = js_exceptions.best_match(validator.iter_errors(arguments))
    if error is not None:
        where = ".".join(str(p) for p in error.absolute_path)
        raise ArgumentError(f"{display}: argument {where or '(all)'!r}: {error.message[:500]}")


class ToolSchema:
    """One tool's input schema, prepared once: property order, required names, a compiled validator."""

    def __init__(self, schema: Mapping[str, Any] | None) -> None:
        # A dict: jsonschema calls any other mapping a broken schema, and a broken schema skips validation.
        self.schema: dict[str, Any] = dict(schema) if isinstance(schema, Mapping) else {}
        props = self.schema.get("properties")
        self.properties: dict[str, Any] = dict(props) if isinstance(props, Mapping) else {}
        req = self.schema.get("required")
        self.required: list[str] = [r for r in req if isinstance(r, str)] if isinstance(req, list) else []
        extra = self.schema.get("additionalProperties")
        # A declared property list is the contract: extra names are typos unless explicitly allowed.
        self.open_ended = bool(extra) if self.properties else extra is not False
        self._validator: Any = None

    def signature(self, name: str, returns: Mapping[str, Any] | None = None) -> str:
        """``name(a: str, b: int = 3, c: list[str] | None = None) -> {id: int}`` in schema property order.

        ``returns`` is the tool's output schema, if it declares one.
        """
        params = []
        for prop, sub in self.properties.items():
            text = f"{prop}: {py_type(sub, self.schema)}"
            if prop not in self.required:
                if isinstance(sub, Mapping) and "default" in sub:
                    default = repr(sub["default"])
                    text += f" = {default if len(default) <= _MAX_DEFAULT_CHARS else '...'}"
                else:
                    text += " = None" if text.endswith("None") else " | None = None"
            params.append(text)
        shape = return_type(returns)
        return f"{name}({', '.join(params)})" + (f" -> {shape}" if shape else "")

    async def bind(self, display: str, args: list[Any], kwargs: Mapping[str, Any]) -> dict[str, Any]:
        """Map positional and keyword arguments onto the properties and validate them.

        ``display`` is the signature shown in errors (``wix.get_product(...)``).
        Positional arguments fill the properties in schema order. The work is bounded whatever the snippet
        sends: too many names are refused at once, and only :func:`checkable` arguments are validated here.
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
        validator = self._compiled()
        if validator and checkable(arguments):
            _validate(validator, display, arguments)
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
            shown = ", ".join(repr(u) for u in unknown[:_SHOWN_NAMES])
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

    def _compiled(self) -> Any:
        if self._validator is None:
            try:
                cls = validators.validator_for(self.schema, default=validators.Draft202012Validator)
                cls.check_schema(self.schema)
                self._validator = cls(self.schema)
            except (js_exceptions.SchemaError, TypeError, ValueError):
                # An upstream's broken schema is its problem: let the upstream judge the call.
                self._validator = False
        return self._validator
