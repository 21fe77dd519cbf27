"""The inspect/exec face (``/mcp/inspect``; ``/mcp`` and stdio under ``serve --mode inspect``): two MCP tools.

``inspect(server_name, tool_name=None)`` returns tool schemas as compressed types; its description lists the servers
and tools of the live catalogue, shortened to a budget at any size. ``inspect(query=...)`` searches them all
(:mod:`onetool.search`): the best tools for a task, each with its argument types. ``exec(server_name, tool_name,
arguments=None)`` calls one tool. Both answer data as TOON text with the raw value in ``structuredContent``. A call
takes the one call path (:mod:`onetool.core.calls`); this module only maps inspect's names to tools and shapes
results as TOON.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any

import anyio.to_thread
from mcp.server import Server, ServerRequestContext
from mcp.types import (
    CallToolRequestParams,
    CallToolResult,
    ListToolsResult,
    PaginatedRequestParams,
    Tool,
)

from onetool.core.calls import Calls, shaped, value_size
from onetool.errors import ArgumentError, ModelError, UnknownTool
from onetool.logs import logger
from onetool.registry import Registry, ToolSchema, Unseen, UpstreamTool
from onetool.registry import Tool as PackTool
from onetool.registry.results import error_result
from onetool.search import DEFAULT_LIMIT, MAX_LIMIT, ToolIndex
from onetool.serve._catalogue_items import items_of
from onetool.serve._requests import LogLevels, RequestClient
from onetool.serve.fanout import face_server
from onetool.serve.inspect._describe import InspectServer, describe_inspect, find_server, find_tool, inspect_schemas
from onetool.serve.inspect._toon import data_result, exec_result
from onetool.serve.inspect.catalogue import CatalogueTool, catalogue, catalogue_tool
from onetool.serve.inspect.compress import compress
from onetool.text import shown_name

if TYPE_CHECKING:
    from onetool.serve._host import CallHost


INSPECT_INPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "server_name": {"type": "string", "description": "A server listed above"},
        "tool_name": {
            "anyOf": [{"type": "string"}, {"type": "null"}],
            "description": "One of its tools; omit for all of them",
        },
        "query": {
            "type": "string",
            "description": "Instead of a server: a task in a few words (`create a GitHub issue`); returns the best "
            "tools for it, of every server",
        },
        "limit": {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT, "description": "With query: tools at most"},
    },
}
EXEC_INPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "server_name": {"type": "string", "description": "A server listed by inspect"},
        "tool_name": {"type": "string", "description": "One of its tools"},
        "arguments": {
            # anyOf, not a list of types: strict clients (Gemini's function declarations, the Inspector's --strict)
            # take one type per schema.
            "anyOf": [{"type": "object"}, {"type": "string"}, {"type": "null"}],
            "description": "The tool's arguments, of the types inspect shows (an object, or the same as JSON text)",
        },
    },
    "required": ["server_name", "tool_name"],
}
EXEC_DESCRIPTION = (
    "Call a tool of a server listed by inspect, with arguments of the types inspect(server_name, tool_name) "
    "shows. Data comes back as TOON text (structuredContent holds the raw value); images and resources as sent."
)
_SCHEMAS = {"inspect": ToolSchema(INSPECT_INPUT_SCHEMA), "exec": ToolSchema(EXEC_INPUT_SCHEMA)}


@dataclass(frozen=True)
class _Snapshot:
    """The inspect view of one registry snapshot: its servers, and the ``inspect`` description they give."""

    registry: Registry
    servers: list[InspectServer[CatalogueTool]]
    description: str


class _View:
    """The inspect view of the gateway's current registry, built once per registry snapshot."""

    def __init__(self, calls: Calls) -> None:
        self._calls = calls
        self._snapshot: _Snapshot | None = None

    def current(self) -> _Snapshot:
        return self.of(self._calls.registry)

    def of(self, registry: Registry) -> _Snapshot:
        if self._snapshot is None or self._snapshot.registry is not registry:
            servers = catalogue(registry)
            self._snapshot = _Snapshot(registry, servers, describe_inspect(servers))
        return self._snapshot

    def server(self, name: str, registry: Registry) -> InspectServer[CatalogueTool]:
        """The server ``name`` in ``registry``: UnknownPack with the closest names, ServerHeld for one an
        operator holds for review, UpstreamUnavailable for one that is disabled (it exists: not unknown)."""
        sight = registry.sight_server(name)
        if sight.why in (Unseen.HELD, Unseen.DISABLED) and (refused := sight.refusal()) is not None:
            raise refused
        return find_server(self.of(registry).servers, name)

    def find(self, server: str, tool: str, registry: Registry) -> PackTool:
        """exec's names in ``registry``: the tool, or UnknownPack / UnknownTool with the closest names."""
        found = self.server(server, registry)
        try:
            return find_tool(found, tool).tool
        except UnknownTool as unknown:
            # A server that lost its connection lists no tools: say it is unavailable, not that the tool is unknown.
            raise registry.sight_server(found.name).refusal(f"{found.name}.{tool}") or unknown from None


def build_inspect_server(gateway: CallHost) -> Server[dict[str, Any]]:
    """The MCP server with the tools ``inspect`` and ``exec``, backed by ``gateway``."""
    return InspectFace(gateway).server()


class InspectFace:
    """The inspect face's handlers over ``gateway``, each a method: ``inspect`` and ``exec`` read the config served
    at each call (a reload's options apply to the next one)."""

    def __init__(self, gateway: CallHost) -> None:
        self.gateway = gateway
        self.calls = gateway.calls
        self.view = _View(gateway.calls)
        self.levels = LogLevels()
        self.handlers: dict[str, Callable[..., Awaitable[CallToolResult]]] = {
            "inspect": self.inspect,
            "exec": self.exec_,
        }

    def server(self) -> Server[dict[str, Any]]:
        gateway = self.gateway
        server = face_server(
            "inspect",
            gateway.subscribe,
            gateway.drain,
            settled=gateway.settled,
            traced=gateway.config.otel is not None,
            items=items_of(gateway),
            on_list_tools=self.list_tools,
            on_call_tool=self.call_tool,
            get_tool_input_schema=lambda name: {"inspect": INSPECT_INPUT_SCHEMA, "exec": EXEC_INPUT_SCHEMA}.get(name),
            on_roots_changed=gateway.roots_changed,
        )
        self.levels.install(server)
        return server

    async def list_tools(
        self, _: ServerRequestContext[Any, Any], params: PaginatedRequestParams | None
    ) -> ListToolsResult:
        current = self.view.current()
        return ListToolsResult(
            tools=[
                Tool(name="inspect", description=current.description, input_schema=INSPECT_INPUT_SCHEMA),
                Tool(name="exec", description=EXEC_DESCRIPTION, input_schema=EXEC_INPUT_SCHEMA),
            ]
        )

    async def inspect(
        self,
        _: RequestClient,
        server_name: str | None = None,
        tool_name: str | None = None,
        query: str | None = None,
        limit: int = DEFAULT_LIMIT,
    ) -> CallToolResult:
        calls, options, max_chars = self.calls, self.gateway.config.inspect, self.gateway.config.sandbox.max_output
        if query is not None:
            if server_name is not None or tool_name is not None:
                raise ArgumentError("inspect: give either a query or a server_name (and tool_name), not both")
            await self.gateway.index.ready()
            found = search(
                self.gateway.index, calls.registry, query, limit, max_description_len=options.max_description_len
            )
            return data_result(found, max_chars=max_chars)
        if server_name is None:
            raise ArgumentError(
                "inspect: name a server_name (the servers are listed in this tool's description), or give a query "
                "(`create a GitHub issue`) to find tools of every server"
            )
        current = self.view.current()
        self.view.server(server_name, current.registry)  # a wrong name is answered at once, on the loop
        schemas = partial(
            inspect_schemas, current.servers, server_name, tool_name, max_description_len=options.max_description_len
        )

        def result() -> CallToolResult:
            # The model reads the (compressed) types as text; programs get the raw schemas (spec §4.1).
            shown = schemas(compression=self.gateway.config.inspect.schema_compression)
            raw = schemas(compression=False) if self.gateway.config.inspect.schema_compression else shown
            return data_result(shown, structured=raw, max_chars=max_chars)

        if tool_name is not None:
            return result()
        # A server may list hundreds of tools: compressing them all is no work for the event loop.
        return await anyio.to_thread.run_sync(result)

    async def exec_(
        self, client: RequestClient, server_name: str, tool_name: str, arguments: dict[str, Any] | str | None = None
    ) -> CallToolResult:
        calls, max_chars = self.calls, self.gateway.config.sandbox.max_output
        arguments = _as_object(arguments)
        target = await calls.find(partial(self.view.find, server_name, tool_name), server=server_name, tool=tool_name)
        label = f"{server_name}.{tool_name}"
        if isinstance(target, UpstreamTool):
            # The server's log messages during the call reach its client, as a run's do.
            async with self.gateway.relay(client) as relay:
                if relay is not None:
                    relay.follow(target.server)
                result = await calls.result(target, [], arguments or {}, label=label, caller=calls.asks(client))
            shape = partial(exec_result, max_chars=max_chars, output_schema=target.output_schema)
            return await shaped(shape, result, value_size(result))
        value = await calls.value(target, [], arguments or {}, label=label, caller=calls.asks(client))
        return await shaped(partial(data_result, max_chars=max_chars), value, value_size(value))

    async def call_tool(self, ctx: ServerRequestContext[Any, Any], params: CallToolRequestParams) -> CallToolResult:
        handler = self.handlers.get(params.name)
        if handler is None:
            return error_result(
                f"Unknown tool {shown_name(params.name)!r}: this server has two tools, `inspect` and `exec`."
            )
        try:
            arguments = await _SCHEMAS[params.name].bind(params.name, [], params.arguments or {})
            # The caller: what an upstream asks its user during exec goes to it.
            return await handler(self.levels.client(ctx), **arguments)
        except ModelError as e:
            return error_result(str(e))
        except Exception as exc:
            # Nothing below is meant to raise anything else; if it does, the client gets a short message and
            # the traceback stays in our log.
            logger.opt(exception=exc).error("the inspect face failed on {}", params.name)
            return error_result(f"Internal error in the gateway: {type(exc).__name__}: {exc}")


def search(index: ToolIndex, registry: Registry, query: str, limit: int, *, max_description_len: int) -> dict[str, Any]:
    """``inspect(query=...)``: the tools found, best first, each named as exec takes it, with what it does and its
    argument types (compressed); descriptions are the upstream's, with their invisible characters named."""
    tools = []
    for hit in index.search(query, limit):
        tool = hit.target
        pack = registry.packs.get(tool.pack)
        server = (pack.server if pack is not None else None) or tool.pack
        listed = catalogue_tool(tool)
        tools.append(
            {
                "server_name": server,
                "tool_name": listed.name,
                "description": hit.description,
                "input": compress(listed.input_schema, max_description_len=max_description_len),
            }
        )
    return {"query": query, "tools": tools}


def _as_object(arguments: dict[str, Any] | str | None) -> dict[str, Any] | None:
    """exec's ``arguments``: an object, or (as several clients send it) the same object as JSON text."""
    if not isinstance(arguments, str):
        return arguments
    try:
        parsed = json.loads(arguments) if arguments.strip() else {}
    except ValueError as e:
        raise ArgumentError(
            f"exec: `arguments` is text that is not JSON ({e}); give the tool's arguments as an object"
        ) from None
    if not isinstance(parsed, dict):
        raise ArgumentError(
            f"exec: `arguments` is JSON text of a {type(parsed).__name__}, not an object; give the tool's arguments as "
            'an object, e.g. {"path": "/tmp"}'
        )
    return parsed
