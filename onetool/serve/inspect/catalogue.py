"""The registry as the inspect face shows it: servers under their configured names, tools under their own names.

``run`` shows packs as Python identifiers (``github_api.get_site_info``); inspect/exec show what the upstream
itself lists (server ``github-api``, tool ``get-site-info``), which is what a model reading the upstream's docs
expects. A local pack is a server under its pack name; where a local pack shares a server's name its tools
win per name, as they do in ``run``. Each tool keeps the registry's :class:`~onetool.registry.Tool`, which is
how exec calls it.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from onetool.logs import logger
from onetool.registry import LocalTool, Registry, Tool, UpstreamTool
from onetool.serve.inspect._describe import InspectServer

__all__ = ["CatalogueTool", "catalogue", "catalogue_tool"]

_ANY_OBJECT: Mapping[str, Any] = {"type": "object"}


@dataclass(frozen=True)
class CatalogueTool:
    name: str
    tool: Tool = field(repr=False)

    @property
    def summary(self) -> str:
        return self.tool.summary

    @property
    def description(self) -> str:
        return self.tool.description

    @cached_property
    def input_schema(self) -> Mapping[str, Any]:
        if isinstance(self.tool, UpstreamTool):
            return self.tool.schema.schema
        if isinstance(self.tool, LocalTool):
            return _local_schema(self.tool)
        return _ANY_OBJECT

    @property
    def output_schema(self) -> Mapping[str, Any] | None:
        return self.tool.output_schema if isinstance(self.tool, UpstreamTool) else None


def catalogue(registry: Registry) -> list[InspectServer[CatalogueTool]]:
    """Every pack of ``registry`` as an inspect server (hidden ones included: describe_inspect leaves them out)."""
    servers = []
    for pack in registry.packs.values():
        status = registry.pack_status(pack)
        tools = [catalogue_tool(t) for t in pack.tools.values()]
        servers.append(
            InspectServer(
                name=pack.server or pack.name,
                tools=tools,
                instructions=status.instructions if status else None,
                status=status.status.value if status else "connected",
            )
        )
    return servers


def catalogue_tool(tool: Tool) -> CatalogueTool:
    """``tool`` under the name its server lists it by (a local tool: its own)."""
    return CatalogueTool(tool.remote_name if isinstance(tool, UpstreamTool) else tool.name, tool)


def _local_schema(tool: LocalTool) -> Mapping[str, Any]:
    """A local function's parameters as a JSON schema: from its checked argument model, else names only."""
    if tool.arguments is not None:
        try:
            return tool.arguments.model_json_schema()
        except Exception as e:  # an annotation pydantic checks but cannot describe: fall back to the names
            logger.debug("local tool {}: no JSON schema for its arguments: {}", tool.signature, e)
    params = tool.parameters.parameters.values()
    plain = [p for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    return {
        "type": "object",
        "properties": {p.name: {} for p in plain},
        "required": [p.name for p in plain if p.default is inspect.Parameter.empty],
    }
