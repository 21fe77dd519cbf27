"""What the strictest MCP clients accept in a tool's JSON schema, as three checks a test can run:

- :func:`meta_problems`: the JSON Schema 2020-12 meta-schema (the dialect MCP's 2025-11-25 spec names).
- :func:`ajv_problems`: Ajv 8 in strict mode (``strict: true``: no unknown keywords, no union types, ``properties``
  and ``items`` only under their type, every ``required`` name a property), the validator the TypeScript SDK,
  the MCP Inspector and many clients run; pinned in tests/package.json.
- :func:`client_problems`: the rules of clients that turn a tool's schema into a function declaration of their
  own (Gemini's OpenAPI subset, OpenAI's function schemas, the MCP Inspector's ``--strict`` portability check):
  ``type`` is one type name, never a list (``anyOf`` instead); every schema has a ``type`` or an ``anyOf``; an
  array says its ``items``; ``enum`` holds strings of a string; only the keywords that subset knows, so no
  ``$ref``, ``$defs``, ``oneOf``, ``allOf``, ``not``, conditionals or pattern properties. ``additionalProperties``
  (a boolean) is allowed: OpenAI's strict mode asks for it, and Gemini's clients drop it.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator, Mapping
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

from tests.conftest import TESTS

__all__ = ["ajv_problems", "client_problems", "meta_problems"]

TYPES = frozenset({"object", "array", "string", "number", "integer", "boolean", "null"})
KEYWORDS = frozenset(
    {
        "type",
        "format",
        "title",
        "description",
        "nullable",
        "enum",
        "default",
        "example",
        "examples",
        "properties",
        "required",
        "additionalProperties",
        "minProperties",
        "maxProperties",
        "items",
        "minItems",
        "maxItems",
        "minLength",
        "maxLength",
        "pattern",
        "minimum",
        "maximum",
        "anyOf",
        "propertyOrdering",
    }
)
"""Gemini's function-declaration Schema fields (its OpenAPI subset), and additionalProperties."""

_AJV = """
const Ajv2020 = require("ajv/dist/2020");
const schemas = JSON.parse(require("fs").readFileSync(0, "utf8"));
const problems = {};
for (const [name, schema] of Object.entries(schemas)) {
  try {
    new Ajv2020({strict: true, allErrors: true}).compile(schema);
  } catch (e) {
    problems[name] = String(e.message || e);
  }
}
process.stdout.write(JSON.stringify(problems));
"""


def meta_problems(schema: Mapping[str, Any]) -> list[str]:
    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError as e:
        return [f"{'/'.join(map(str, e.absolute_path))}: {e.message}"]
    return []


def ajv_problems(schemas: Mapping[str, Mapping[str, Any]]) -> dict[str, str]:
    """Each schema Ajv's strict mode refuses to compile, by name, with its message."""
    done = subprocess.run(
        ["node", "-e", _AJV],
        input=json.dumps(schemas),
        capture_output=True,
        text=True,
        cwd=TESTS,  # where node_modules/ajv is
        timeout=60,
        check=True,
    )
    return dict(json.loads(done.stdout))


def client_problems(schema: Mapping[str, Any]) -> list[str]:
    """What a strict client refuses in a tool's input schema, each with where."""
    problems = [] if schema.get("type") == "object" else ["/: a tool's input schema must be of type object"]
    return problems + list(_walk(schema, ""))


def _walk(node: Any, where: str) -> Iterator[str]:
    at = where or "/"
    if not isinstance(node, Mapping):
        yield f"{at}: a schema must be an object, not {type(node).__name__}"
        return
    for key in node:
        if key not in KEYWORDS:
            yield f"{at}: {key!r} is not a keyword strict clients know"
    kind = node.get("type")
    if isinstance(kind, list):
        yield f"{at}: type is a list {kind}; strict clients take one type (use anyOf)"
    elif kind is not None and kind not in TYPES:
        yield f"{at}: type {kind!r} is no JSON type"
    elif kind is None and "anyOf" not in node:
        yield f"{at}: no type (nor anyOf)"
    if kind == "array" and "items" not in node:
        yield f"{at}: an array without items"
    if ("properties" in node or "required" in node) and kind != "object":
        yield f"{at}: properties or required on a schema that is not of type object"
    properties = node.get("properties", {})
    for name in node.get("required", []):
        if name not in properties:
            yield f"{at}: required {name!r} is no property"
    if "enum" in node and (kind != "string" or not all(isinstance(v, str) for v in node["enum"])):
        yield f"{at}: enum of something else than strings"
    if not isinstance(node.get("additionalProperties", False), bool):
        yield f"{at}: additionalProperties as a schema"
    for name, sub in properties.items():
        yield from _walk(sub, f"{where}/properties/{name}")
    if "items" in node:
        yield from _walk(node["items"], f"{where}/items")
    for i, sub in enumerate(node.get("anyOf", [])):
        yield from _walk(sub, f"{where}/anyOf/{i}")
