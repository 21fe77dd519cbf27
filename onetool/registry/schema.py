"""A tool's JSON input schema as a Python signature, and argument binding against it.

Upstream tools are described by JSON Schema; snippets call them like Python
functions. This module maps one to the other: ``signature()`` renders
``get_product(product_id: str, include_variants: bool = False)`` for docs and
errors, and ``bind()`` turns ``(args, kwargs)`` into the arguments object,
checking it before the call leaves the gateway.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import anyio.to_thread
from jsonschema import exceptions as js_exceptions
from jsonschema import validators

from onetool.errors import ArgumentError

_SIMPLE = {
    "string": "str",
    "integer": "int",
    "number": "float",
    "boolean": "bool",
    "null": "None",
    "object": "dict",
    "array": "list",
}


def py_type(schema: Any, depth: int = 0) -> str:
    """A compact Python-style type for a JSON schema: ``list[str]``, ``Literal['a']``, ``int | None``."""
    if not isinstance(schema, Mapping) or depth > 3:
        return "Any"
    if "enum" in schema and isinstance(schema["enum"], list):
        return "Literal[" + ", ".join(repr(v) for v in schema["enum"][:8]) + "]"
    if "const" in schema:
        return f"Literal[{schema['const']!r}]"
    for key in ("anyOf", "oneOf"):
        if isinstance(schema.get(key), list):
            return " | ".join(dict.fromkeys(py_type(s, depth + 1) for s in schema[key]))
    kind = schema.get("type")
    if isinstance(kind, list):
        return " | ".join(_SIMPLE.get(k, "Any") for k in kind)
    if kind == "array":
        items = schema.get("items")
        return f"list[{py_type(items, depth + 1)}]" if isinstance(items, Mapping) and items else "list"
    if kind == "object":
        extra = schema.get("additionalProperties")
        if isinstance(extra, Mapping) and not schema.get("properties"):
            return f"dict[str, {py_type(extra, depth + 1)}]"
        return "dict"
    return _SIMPLE.get(kind, "Any") if isinstance(kind, str) else "Any"


_ON_LOOP_NODES = 2_000
"""Arguments of up to this many JSON values are validated on the event loop: well under a millisecond."""
MAX_ARGUMENT_NODES = 100_000
"""jsonschema spends tens of microseconds per value: past this many, a call is refused rather than validated."""


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


def _validate(validator: Any, display: str, arguments: dict[str, Any]) -> None:
    error = js_exceptions.best_match(validator.iter_errors(arguments))
    if error is not None:
        where = ".".join(str(p) for p in error.absolute_path)
        raise ArgumentError(f"{display}: argument {where or '(all)'!r}: {error.message[:500]}")


def _validate_large(validator: Any, display: str, arguments: dict[str, Any]) -> None:
    if count_nodes(arguments, MAX_ARGUMENT_NODES) > MAX_ARGUMENT_NODES:
        raise ArgumentError(
            f"{display}: the arguments hold more than {MAX_ARGUMENT_NODES:,} values; pass less data per call"
        )
    _validate(validator, display, arguments)


class ToolSchema:
    """One tool's input schema, prepared once: property order, required names, a compiled validator."""

    def __init__(self, schema: Mapping[str, Any] | None) -> None:
        self.schema: Mapping[str, Any] = schema if isinstance(schema, Mapping) else {}
        props = self.schema.get("properties")
        self.properties: dict[str, Any] = dict(props) if isinstance(props, Mapping) else {}
        req = self.schema.get("required")
        self.required: list[str] = [r for r in req if isinstance(r, str)] if isinstance(req, list) else []
        extra = self.schema.get("additionalProperties")
        # A declared property list is the contract: extra names are typos unless explicitly allowed.
        self.open_ended = bool(extra) if self.properties else extra is not False
        self._validator: Any = None

    def signature(self, name: str) -> str:
        """``name(a: str, b: int = 3, c: list[str] | None = None)`` in schema property order."""
        params = []
        for prop, sub in self.properties.items():
            text = f"{prop}: {py_type(sub)}"
            if prop not in self.required:
                if isinstance(sub, Mapping) and "default" in sub:
                    text += f" = {sub['default']!r}"
                else:
                    text += " = None" if text.endswith("None") else " | None = None"
            params.append(text)
        return f"{name}({', '.join(params)})"

    async def bind(self, display: str, args: list[Any], kwargs: Mapping[str, Any]) -> dict[str, Any]:
        """Map positional and keyword arguments onto the properties and validate them.

        ``display`` is the signature shown in errors (``wix.get_product(...)``).
        Positional arguments fill the properties in schema order. Small arguments are validated at once;
        large ones in a worker thread, so no snippet's argument holds up the event loop, and past
        MAX_ARGUMENT_NODES they are refused before validation starts.
        """
        props = list(self.properties)
        arguments: dict[str, Any] = dict(zip(props, args, strict=False))
        for key, value in kwargs.items():
            if key in arguments:
                raise ArgumentError(f"{display} got multiple values for argument '{key}'")
            arguments[key] = value
        self.check_shape(display, len(args), arguments)
        validator = self._compiled()
        if validator:
            if count_nodes(arguments, _ON_LOOP_NODES) <= _ON_LOOP_NODES:
                _validate(validator, display, arguments)
            else:
                await anyio.to_thread.run_sync(_validate_large, validator, display, arguments, abandon_on_cancel=True)
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
        unknown = [k for k in given if k not in self.properties]
        if unknown and not self.open_ended:
            raise ArgumentError(
                f"{display} got unknown argument{'s' if len(unknown) > 1 else ''} "
                f"{', '.join(repr(u) for u in sorted(unknown))}; it accepts: {', '.join(props) or 'no arguments'}"
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
