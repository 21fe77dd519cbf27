"""JSON values checked against a JSON schema within bounds: a tool call's arguments before they leave the
gateway (:mod:`onetool.registry.schema`), an upstream's structured result when it arrives (:mod:`onetool.upstream`).

A value is measured first (a walk that stops just past the caps, so its cost is bounded by them), then validated by
jsonschema-rs, which walks Python values in Rust at tens of nanoseconds a value and stops at the first error. What
is past a cap is not checked: an argument is then refused, never forwarded (an upstream validating a million bad
items may hold its one event loop, and every other client of it, for seconds).

- :data:`MAX_VALUES` JSON values per value checked and :data:`MAX_RUN_VALUES` per run (a :class:`CheckBudget`, so
  that a loop of calls cannot multiply the host's work): with the caps, one measure and check cost the event loop
  tens of milliseconds at most.
- ``servers.NAME.max_argument_mb``: bytes of a call's arguments as JSON, the server's own cap.

Schemas are compiled offline (a ``$ref`` to a URL is never fetched: an upstream's schema must not make the gateway
open connections), without format assertions (formats are annotations, as python-jsonschema reads them), and with
OpenAPI 3.0's ``nullable: true`` read as :mod:`onetool.schemas.walk` reads it: null is allowed too.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import jsonschema_rs

from onetool.errors import ArgumentError

__all__ = ["MAX_RUN_VALUES", "MAX_VALUES", "CheckBudget", "Validator", "measure"]

MAX_VALUES = 100_000
"""JSON values (keys included) the gateway checks in one value: a call's arguments, an upstream's result."""
MAX_RUN_VALUES = 1_000_000
"""JSON values the gateway checks over all of one run's calls; past it, the run's calls are refused."""
_MAX_MESSAGE = 500
"""Characters of a validation error's message: jsonschema-rs quotes the offending value whole."""
_MAX_REWRITE_NODES = 20_000
"""Schema nodes the ``nullable`` rewrite visits; a larger schema's deeper nodes are left as they are."""


@dataclass
class CheckBudget:
    """The values the gateway may still check for one run; a face without runs gives each request its own."""

    left: int = MAX_RUN_VALUES

    def take(self, display: str, values: int) -> None:
        if values > self.left:
            raise ArgumentError(
                f"{display}: this run's calls passed more than {MAX_RUN_VALUES:,} values in all, as many as the "
                "gateway checks for one run; pass less data, or spread the work over several runs"
            )
        self.left -= values


def measure(value: Any, max_values: int, max_bytes: int) -> tuple[int, int]:
    """(values, bytes) of ``value`` as JSON, about (a string by its UTF-8 length, a number by its digits);
    the walk stops as soon as either is past its cap, so it costs no more than the caps."""
    values, size = 0, 0
    stack: list[Any] = [value]
    while stack and values <= max_values and size <= max_bytes:
        item = stack.pop()
        values += 1
        if isinstance(item, str):
            # isascii() reads a flag of the string: only text with other characters is encoded to be measured.
            size += 3 + (len(item) if item.isascii() else len(item.encode("utf-8", "surrogatepass")))
        elif isinstance(item, dict):
            size += 2
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            size += 2
            stack.extend(item)
        elif type(item) is int:
            size += item.bit_length() // 3 + 2  # a bound on its decimal digits, and a comma
        else:
            size += 25  # a float's repr, true, false, null
    return values, size


class Validator:
    """One schema, compiled once; None of :meth:`of` when the schema is broken (the upstream's own problem: the
    values are still measured and capped, and the upstream judges them)."""

    def __init__(self, compiled: Any) -> None:
        self._compiled = compiled

    @classmethod
    def of(cls, schema: dict[str, Any]) -> Validator | None:
        try:
            readable = _nullable(schema, [_MAX_REWRITE_NODES])
            try:
                return cls(jsonschema_rs.validator_for(readable, **_OPTIONS))
            except jsonschema_rs.ValidationError as e:
                if "meta-schema" not in e.message:
                    raise
            # A $schema it does not know is read as python-jsonschema reads it: as the newest draft.
            return cls(jsonschema_rs.Draft202012Validator(readable, **_OPTIONS))
        except (jsonschema_rs.ValidationError, RecursionError, ValueError, TypeError):
            return None

    def problem(self, value: Any) -> tuple[str, str] | None:
        """Where (``items.3``, empty for the whole value) and how ``value`` first breaks the schema, or None."""
        try:
            self._compiled.validate(value)
        except jsonschema_rs.ValidationError as e:
            message = e.message if len(e.message) <= _MAX_MESSAGE else e.message[:_MAX_MESSAGE] + "..."
            return ".".join(str(p) for p in e.instance_path), message
        return None


_OPTIONS: dict[str, Any] = {"validate_formats": False, "offline": True}

_SCHEMA = ("items", "additionalItems", "additionalProperties", "contains", "not", "if", "then", "else")
_SCHEMA_ALSO = ("propertyNames", "unevaluatedItems", "unevaluatedProperties", "contentSchema")
_SCHEMA_LISTS = ("allOf", "anyOf", "oneOf", "prefixItems", "items")
_SCHEMA_MAPS = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas", "dependencies")
_APPLICATORS = ("$ref", "$dynamicRef", "allOf", "anyOf", "oneOf", "not", "if", "then", "else")
"""The keywords of a node that may refuse null besides ``type``, ``enum`` and ``const``: every other keyword
applies to one JSON type only, and lets a null through."""


def _nullable(schema: Any, budget: list[int]) -> Any:
    """A copy of ``schema`` in which every ``nullable: true`` node also allows null: ``type`` gains ``null``,
    ``enum`` (and ``const``) gain None, and the node's applicators move into ``anyOf: [{type: null}, {...}]``.
    Every other keyword stays where it was, so a ``$ref`` into the node's ``$defs`` or properties still holds."""
    budget[0] -= 1
    if not isinstance(schema, dict) or budget[0] < 0:
        return schema
    node = dict(schema)
    for key in _SCHEMA + _SCHEMA_ALSO:
        if isinstance(node.get(key), dict | bool):
            node[key] = _nullable(node[key], budget)
    for key in _SCHEMA_LISTS:
        if isinstance(node.get(key), list):
            node[key] = [_nullable(sub, budget) for sub in node[key]]
    for key in _SCHEMA_MAPS:
        if isinstance(node.get(key), dict):
            node[key] = {name: _nullable(sub, budget) for name, sub in node[key].items()}
    if node.get("nullable") is not True:
        return node
    kind = node.get("type")
    if isinstance(kind, str) and kind != "null":
        node["type"] = [kind, "null"]
    elif isinstance(kind, list) and "null" not in kind:
        node["type"] = [*kind, "null"]
    if "const" in node and "enum" not in node:
        node["enum"] = [node.pop("const")]
    if isinstance(node.get("enum"), list) and None not in node["enum"]:
        node["enum"] = [*node["enum"], None]
    moved = {key: node.pop(key) for key in _APPLICATORS if key in node}
    if moved:
        node["anyOf"] = [{"type": "null"}, moved]
    return node
