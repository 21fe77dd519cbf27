"""Introspection of the proxied MCP servers, callable from snippets as ``proxy.*``."""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from functools import partial
from typing import Any

from pydantic import BaseModel
from pydantic_core import to_jsonable_python

from onetool.core.calls import PackContext
from onetool.errors import ModelError, UnknownPack
from onetool.registry import LocalTool, Registry, Sight, ToolSchema, Unseen, UpstreamTool
from onetool.registry.schema import py_type
from onetool.search import DEFAULT_LIMIT
from onetool.text import shown_name

__all__ = [
    "call",
    "describe",
    "get_prompt",
    "list_prompts",
    "list_resources",
    "list_servers",
    "list_tools",
    "read_resource",
    "search",
]


async def list_servers(*, ctx: PackContext) -> list[dict[str, Any]]:
    """Every server and its live status.

    Each (but quarantined ones) with name, pack, type, enabled, status, error (and what to fix, when waiting will
    not help), tools, the server's own instructions, and for OAuth servers oauth_status (authenticated,
    pending_authorization or authentication_failed)."""
    return [
        {
            "name": s.name,
            "pack": s.pack,
            "type": s.type,
            "enabled": s.enabled,
            "status": s.status,
            "error": s.error,
            **({"fix": s.fix} if s.fix else {}),
            "tools": s.tool_count,
            "instructions": s.instructions,
            **({"oauth_status": s.oauth_status} if s.oauth_status else {}),
        }
        for s in ctx.registry().servers()
    ]


async def search(query: str, limit: int = DEFAULT_LIMIT, *, ctx: PackContext) -> list[dict[str, Any]]:
    """The tools that best do a task, best first.

    Say the task in a few words ("create a GitHub issue"). Each result has tool (call it as written:
    pack.tool(...)), signature, description and server; at most limit (1 to 50) results."""
    await ctx.index.ready()
    return [hit.to_dict() for hit in ctx.index.search(query, limit)]


async def list_tools(server: str, *, ctx: PackContext) -> list[dict[str, Any]]:
    """A server's tools, with signatures and descriptions.

    Each with name, signature, description, and where it comes from. Local tools that shadow an upstream tool
    of the same name are marked ``shadows_upstream``.
    """
    registry = ctx.registry()
    pack = registry.packs.get(_pack_of(server, registry))
    if pack is None:
        if (sight := registry.sight_server(server)).why is Unseen.HELD:
            raise sight.refusal() or _unknown_server(server, registry)
        names = [s.name for s in ctx.registry().servers()]
        local = [p for p in registry.packs if p not in {s.pack for s in ctx.registry().servers()}]
        raise ModelError(
            f"unknown server '{shown_name(server)}'; servers: {', '.join(names) or 'none'}"
            + (f"; local packs: {', '.join(local)}" if local else "")
        )
    status = registry.pack_status(pack)
    if status is not None and not status.connected and not pack.tools:
        raise status.unavailable()
    tools = [
        {
            "name": t.name,
            "signature": t.signature,
            "description": t.description,
            "source": t.source,
            **({"upstream_name": t.remote_name} if isinstance(t, UpstreamTool) and t.remote_name != t.name else {}),
            **({"shadows_upstream": True} if t.name in pack.shadowed else {}),
        }
        for t in pack.tools.values()
    ]
    return tools


async def describe(tool: str, *, ctx: PackContext) -> dict[str, Any]:
    """A tool's types and description.

    Named as snippets call it (``"github.search_issues"``): its typed signature, full description, and each
    parameter's type, whether it is required, its default and its description."""
    pack, _, name = tool.partition(".")
    if not name:
        raise ModelError(
            f'name one tool as "pack.tool", not {shown_name(tool)!r}: '
            f'proxy.list_tools(server="{shown_name(pack)}") lists a pack\'s tools'
        )
    found = ctx.registry().resolve(pack, name)  # unknown names raise with what exists
    if isinstance(found, LocalTool):
        params = [_local_param(p) for p in found.parameters.parameters.values()]
    else:
        schema = found.schema if isinstance(found, UpstreamTool) else ToolSchema(None)
        params = [_schema_param(p, sub, p in schema.required, schema.schema) for p, sub in schema.properties.items()]
    return {"signature": found.signature, "description": found.description, "parameters": params}


def _schema_param(name: str, schema: Any, required: bool, root: Mapping[str, Any]) -> dict[str, Any]:
    sub = schema if isinstance(schema, Mapping) else {}
    out: dict[str, Any] = {"name": name, "type": py_type(sub, root), "required": required}
    if "default" in sub:
        out["default"] = sub["default"]
    if isinstance(sub.get("description"), str):
        out["description"] = sub["description"]
    return out


def _local_param(p: inspect.Parameter) -> dict[str, Any]:
    out: dict[str, Any] = {"name": p.name, "required": p.default is p.empty and p.kind not in _VARIADIC}
    if p.annotation is not p.empty:
        out["type"] = p.annotation if isinstance(p.annotation, str) else inspect.formatannotation(p.annotation)
    if p.default is not p.empty:
        out["default"] = to_jsonable_python(p.default, fallback=repr)
    return out


_VARIADIC = (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)


async def call(server: str, tool: str, arguments: dict[str, Any] | None = None, *, ctx: PackContext) -> Any:
    """Call a tool by its upstream name, for names that are not Python identifiers."""
    target = await ctx.calls.find(partial(_upstream_tool, server, tool), server=_configured(server, ctx), tool=tool)
    label = f"proxy.call('{shown_name(server)}', '{shown_name(tool)}', ...)"
    return await ctx.calls.value(target, [], arguments or {}, label=label, caller=ctx.caller, budget=ctx.budget)


def _upstream_tool(server: str, tool: str, registry: Registry) -> UpstreamTool:
    """The tool ``server`` lists as ``tool``, a local tool of the same name shadowing it or not."""
    sight = registry.sight_upstream(server, tool)
    found = sight.found(partial(_unknown_tool, server, tool, registry), tool)
    assert isinstance(found, UpstreamTool)  # sight_upstream finds only a server's own tools
    return found


def _unknown_tool(server: str, tool: str, registry: Registry, sight: Sight) -> ModelError:
    if sight.pack is None:
        return _unknown_server(server, registry)
    return registry.unknown(sight.pack.name, tool)(sight)


async def list_resources(server: str, *, ctx: PackContext) -> list[dict[str, Any]]:
    """The resources a server offers.

    Each with uri, name, mimeType, description. Read one with proxy.read_resource."""
    return [_plain(r) for r in await ctx.pool.list_resources(_server(server, ctx))]


async def read_resource(server: str, uri: str, *, ctx: PackContext) -> list[dict[str, Any]]:
    """A resource's contents.

    E.g. of a resource_link a tool returned: a list of {uri, mimeType, text or blob}."""
    result = await ctx.pool.read_resource(_server(server, ctx), uri)
    return [_plain(c) for c in result.contents]


async def list_prompts(server: str, *, ctx: PackContext) -> list[dict[str, Any]]:
    """The prompts a server offers.

    Each with name, description, arguments. Fetch one with proxy.get_prompt."""
    return [_plain(p) for p in await ctx.pool.list_prompts(_server(server, ctx))]


async def get_prompt(
    server: str, name: str, arguments: dict[str, str] | None = None, *, ctx: PackContext
) -> dict[str, Any]:
    """A prompt filled in with arguments.

    Returns {description, messages: [{role, content}]}."""
    return _plain(await ctx.pool.get_prompt(_server(server, ctx), name, arguments or {}))


def _plain(model: BaseModel) -> dict[str, Any]:
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)


def _server(server: str, ctx: PackContext) -> str:
    """The configured name of ``server``, given as configured (``github-api``) or as its pack (``github_api``)."""
    registry = ctx.registry()
    sight = registry.sight_server(server)
    if sight.why is Unseen.HELD or sight.server is None:
        raise sight.refusal() or _unknown_server(server, registry)
    return sight.server


def _unknown_server(server: str, registry: Registry) -> ModelError:
    servers = ", ".join(s.name for s in registry.servers())
    return UnknownPack(f"unknown server '{shown_name(server)}'; servers: {servers or 'none'}")


def _pack_of(server: str, registry: Registry) -> str:
    """Accept the configured server name (``github-api``) or its pack name (``github_api``)."""
    for s in registry.servers():
        if server in (s.name, s.pack):
            return s.pack
    return server


def _configured(server: str, ctx: PackContext) -> str | None:
    """The configured name of ``server`` (given either way), if it names one."""
    return next((s.name for s in ctx.registry().servers() if server in (s.name, s.pack)), None)
