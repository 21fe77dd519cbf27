"""Every face's own tools (run; inspect and exec; /mcp/direct's management tools in every mode) have input schemas
the strictest clients accept: the JSON Schema meta-schema, Ajv's strict mode and the function-declaration rules of
Gemini-style clients (tests/strict_schemas.py). Their upstream tools are the upstreams' own, listed as sent."""

from __future__ import annotations

from typing import Any

import pytest
from mcp import Client
from mcp.server import Server

from onetool.config import Config
from onetool.core.gateway import Gateway
from onetool.serve.direct import build_direct_server
from onetool.serve.direct._face import RESERVED
from onetool.serve.inspect import build_inspect_server
from onetool.serve.run import build_run_server
from tests.strict_schemas import ajv_problems, client_problems, meta_problems

pytestmark = pytest.mark.anyio

REGISTRIES = [{"name": "local", "url": "http://127.0.0.1:9"}]
"""So /mcp/direct lists list_registries and search_servers too; never reached."""


async def own_schemas() -> dict[str, dict[str, Any]]:
    """Each face's own tools' input schemas (and output schemas, where they have one), by face and tool."""
    faces: dict[str, Any] = {"run": build_run_server, "inspect": build_inspect_server}
    for mode in ("read-only", "propose", "full"):
        faces[f"direct {mode}"] = lambda gw, mode=mode: build_direct_server(gw, ":", mode)
    faces["direct expose=search"] = lambda gw: build_direct_server(gw, ":", "propose", "search")  # call_tool too
    schemas: dict[str, dict[str, Any]] = {}
    async with Gateway(Config.model_validate({"registries": REGISTRIES}), warm_workers=0) as gateway:
        for face, build in faces.items():
            server: Server[Any] = build(gateway)
            async with Client(server) as client:
                for tool in (await client.list_tools()).tools:
                    schemas[f"{face}: {tool.name} input"] = tool.input_schema
                    if tool.output_schema is not None:
                        schemas[f"{face}: {tool.name} output"] = tool.output_schema
    return schemas


async def test_every_faces_own_tool_schemas_pass_the_strictest_validators() -> None:
    schemas = await own_schemas()
    names = {key.split(": ")[1].removesuffix(" input") for key in schemas}
    assert names == {"run", "inspect", "exec"} | RESERVED  # every face's own tools, and nothing else
    problems = {key: meta_problems(s) + client_problems(s) for key, s in schemas.items()}
    assert {key: found for key, found in problems.items() if found} == {}
    assert ajv_problems(schemas) == {}


def test_the_checks_catch_what_strict_clients_refuse() -> None:
    """The validators are not vacuous: what inspect's and exec's schemas held before, and its usual companions."""
    union = {"type": "object", "properties": {"tool_name": {"type": ["string", "null"]}}}
    untyped = {"type": "object", "properties": {"x": {"description": "anything"}}}
    ref = {"type": "object", "properties": {"x": {"$ref": "#/$defs/x"}}, "$defs": {"x": {"type": "string"}}}
    loose = {"type": "object", "properties": {"a": {"type": "array"}}, "required": ["b"]}
    assert client_problems(union) == [
        "/properties/tool_name: type is a list ['string', 'null']; strict clients take one type (use anyOf)"
    ]
    assert client_problems(untyped) == ["/properties/x: no type (nor anyOf)"]
    assert "/: '$defs' is not a keyword strict clients know" in client_problems(ref)
    assert client_problems(loose) == ["/: required 'b' is no property", "/properties/a: an array without items"]
    assert meta_problems({"type": "object", "properties": {"x": {"type": "text"}}}) != []
    # Ajv lets a type and null pass as one (a nullable type), not exec's old three.
    wide = {"type": "object", "properties": {"arguments": {"type": ["object", "string", "null"]}}}
    refused = ajv_problems({"union": wide, "loose": loose, "fine": {"type": "object", "properties": {}}})
    assert set(refused) == {"union", "loose"} and "allowUnionTypes" in refused["union"]
