"""The direct face, ``/mcp/direct``: every visible upstream tool as ``server:tool``, next to management tools.

Upstream tools are listed as their server sent them (title, description, input schema, annotations, icons,
``_meta``) under a new name, and calls pass straight to the upstream through the pool: same timeouts,
cancellation and ``proxy.tool.call`` log span as a snippet's call, the same argument validation first, and the
upstream's result returned untouched, unless its text is longer than ``sandbox.max_output``: then it is cut as
``run``'s results are, and kept whole for ``read_cache`` (:mod:`._cache`). So that a cut result stays a success,
an ``outputSchema`` no cut would match is left out of the listing, and the tool's description says so. What is
visible is ``gateway.visible_tools(server)``, so disabled, disconnected and quarantined servers, and held tools, are
neither listed nor callable. A call takes the one call path (:mod:`onetool.core.calls`): this face only maps its names
to tools. The management tools (``run``, ``upstream_servers``, ``quarantine_security``, ``read_cache``,
``list_registries``, ``search_servers``, ``search_tools``, ``call_tool``) carry no prefix; no upstream name can take
theirs. With ``direct.expose: search`` only they are listed, and a model finds upstream tools with ``search_tools``
(:mod:`._search`); every upstream tool stays callable by its name either way.

Both parts of a listed name are within MCP's tool-name charset (SEP-986: letters, digits, ``_``, ``.``, ``-``): a
server or tool name with any other character (a space, a quote, a newline, a terminal escape) is listed renamed,
stably and visibly (:func:`onetool.text.mcp_name`: ``get weather`` -> ``get_weather_dce3870e``), with a WARNING
naming its server, and calling the new name calls the upstream's own. Between them is ``http.direct_separator``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any, Literal

from mcp import types
from mcp.server import Server, ServerRequestContext
from mcp.types import SERVER_INFO_META_KEY

from onetool.config import Exposure, Management, to_identifier
from onetool.errors import ModelError, UnknownTool
from onetool.logs import logger
from onetool.registry import Registry, ToolSchema, UpstreamTool
from onetool.registry.results import error_result
from onetool.serve._catalogue_items import items_of
from onetool.serve._names import namespaced
from onetool.serve._requests import LogLevels, RequestClient
from onetool.serve.direct._cache import ResultCache, cut_result, without_output_schema
from onetool.serve.direct._manage import MANAGEMENT_NAMES, ManagementTools, data_answer
from onetool.serve.direct._registries import Registries
from onetool.serve.direct._search import (
    CALL_TOOL,
    CALL_TOOL_TOOL,
    SEARCH_NAMES,
    SEARCH_TOOLS,
    SEARCH_TOOLS_TOOL,
    call_target,
    search_tools,
)
from onetool.serve.fanout import face_server
from onetool.serve.run import RUN_INPUT_SCHEMA, call_run, run_tool
from onetool.text import closest, mcp_name, shown_name

if TYPE_CHECKING:
    from onetool.core.gateway import Gateway


Separator = Literal[":", "__", "."]

RESERVED = frozenset({"run", *MANAGEMENT_NAMES, *SEARCH_NAMES})


def direct_names(
    tools: Iterable[tuple[str, str]], separator: str, reserved: Iterable[str] = RESERVED
) -> dict[str, tuple[str, str]]:
    """Each direct name -> its (server, upstream tool name): :func:`onetool.serve._names.namespaced`, clear of the
    management tools' names."""
    return namespaced(tools, separator, reserved)


class DirectCatalogue:
    """One snapshot of what /mcp/direct lists and routes: rebuilt when the visible tools change."""

    def __init__(
        self, visible: Mapping[str, Sequence[types.Tool]], separator: str, before: DirectCatalogue | None = None
    ) -> None:
        """``before``: the snapshot this one replaces; a server's renamed tools are warned of once, not again on
        every rebuild while they stay the same."""
        self.separator = separator
        by_name: dict[tuple[str, str], types.Tool] = {}
        for server, tools in visible.items():
            for t in tools:
                by_name.setdefault((server, t.name), t)  # a name listed twice: the first one
        names = direct_names(by_name, separator)
        self.renamed = _renamed(names)
        """server -> its tools listed renamed (``'tool' as 'name'``)."""
        _warn_renamed(self.renamed, {} if before is None else before.renamed)
        self.tools = {name: _tool(name, server, by_name[server, tool]) for name, (server, tool) in names.items()}
        self.names = {pair: name for name, pair in names.items()}
        """(server, upstream name) -> the tool's name here."""
        self.listed = [
            without_output_schema(by_name[pair]).model_copy(update={"name": name}) for name, pair in names.items()
        ]
        # The key holds ids of the upstream Tool objects; keeping them alive means no new object can reuse one.
        self._visible = visible
        self.key = _key(visible)
        self.servers = sorted({t.server for t in self.tools.values()})

    def unknown(self, name: str) -> str:
        """Why ``name`` cannot be called, and what can."""
        names = [*RESERVED, *self.tools]
        close = closest(name, names)
        hint = f" Did you mean {', '.join(repr(c) for c in close)}?" if close else ""
        return (
            f"unknown tool {shown_name(name)!r} on /mcp/direct.{hint} "
            f"Upstream tools are named server{self.separator}tool; "
            f"servers with tools now: {', '.join(self.servers) or 'none'} (tools/list has them all). A server that is "
            "disabled, disconnected or quarantined lists no tools: upstream_servers(operation='list') says why."
        )


def _renamed(names: Mapping[str, tuple[str, str]]) -> dict[str, tuple[str, ...]]:
    """The servers some of whose tool names (or their own) are listed renamed, with those tools."""
    renamed: dict[str, list[str]] = {}
    for name, (server, tool) in names.items():
        if mcp_name(server) != server or mcp_name(tool) != tool:
            renamed.setdefault(server, []).append(f"'{shown_name(tool)}' as '{name}'")
    return {server: tuple(which) for server, which in renamed.items()}


def _warn_renamed(renamed: Mapping[str, tuple[str, ...]], warned: Mapping[str, tuple[str, ...]]) -> None:
    """One WARNING per server whose renamed tools are not those already ``warned`` of, naming a few of them."""
    for server, which in renamed.items():
        if warned.get(server) == which:
            continue
        more = f" and {len(which) - 3} more" if len(which) > 3 else ""
        logger.bind(server=server).warning(
            "server '{}': {} outside MCP's tool-name charset ([A-Za-z0-9_.-]), listed on /mcp/direct renamed: {}{}",
            shown_name(server),
            "a name is" if len(which) == 1 else f"{len(which)} names are",
            ", ".join(which[:3]),
            more,
        )


def _tool(name: str, server: str, tool: types.Tool) -> UpstreamTool:
    """An upstream tool as the call path calls it; named by its direct name, which argument errors quote."""
    return UpstreamTool(
        pack=to_identifier(server),
        name=name,
        description=tool.description or "",
        signature=name,
        server=server,
        remote_name=tool.name,
        schema=ToolSchema(tool.input_schema),
        output_schema=tool.output_schema,
    )


def _key(visible: Mapping[str, Sequence[types.Tool]]) -> tuple[tuple[str, tuple[int, ...]], ...]:
    return tuple((server, tuple(map(id, tools))) for server, tools in visible.items())


class DirectFace:
    def __init__(self, gateway: Gateway, separator: Separator, management: Management, expose: Exposure) -> None:
        self._gateway = gateway
        self._separator = separator
        self._expose = expose
        config = gateway.config
        self._management = ManagementTools(
            management, ResultCache.from_config(config.direct), Registries(config.registries)
        )
        self._catalogue = DirectCatalogue({}, separator)
        self._seen: Registry | None = None
        self.levels = LogLevels()

    def catalogue(self) -> DirectCatalogue:
        """The current snapshot, so a list or call never sees a stale catalogue.

        The gateway replaces its registry after every change of what a face may show (a catalogue, a status,
        a quarantine, an approval), so a request that finds the registry it saw last reads nothing else.
        """
        gw = self._gateway
        registry = gw.registry
        if registry is not self._seen:
            visible = {view.name: gw.visible_tools(view.name) for view in gw.control.list()}
            if _key(visible) != self._catalogue.key:
                self._catalogue = DirectCatalogue(visible, self._separator, self._catalogue)
            self._seen = registry
        return self._catalogue

    async def list_tools(
        self, ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        management = [run_tool(self._gateway), *self._management.tools.values(), SEARCH_TOOLS_TOOL]
        if self._expose == "search":
            return types.ListToolsResult(tools=[*management, CALL_TOOL_TOOL])
        return types.ListToolsResult(tools=[*management, *self.catalogue().listed])

    async def call_tool(
        self, ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        return await self.call(params.name, params.arguments or {}, self.levels.client(ctx))

    async def call(self, name: str, arguments: dict[str, Any], client: RequestClient | None) -> types.CallToolResult:
        """Call ``name`` as listed; ``client``, if given, gets the call's progress (and a run's upstream logs) and
        is asked what the upstream asks its user."""
        if name == "run":
            return await call_run(self._gateway, arguments, client, face="direct")
        max_chars = self._gateway.config.sandbox.max_output
        if name in MANAGEMENT_NAMES:
            return await self._management.call(self._gateway.control, name, arguments, max_chars=max_chars)
        if name in SEARCH_NAMES:
            return await self._search_or_call(name, arguments, client)
        server = self._server_of(name)
        try:
            target = await self._gateway.calls.find(partial(self._lookup, name, server), server=server, tool=name)
            progress = client.progress if client is not None and client.wants_progress else None
            calls = self._gateway.calls
            caller = calls.asks(client) if client is not None else None
            # The server's log messages during the call reach its client too, as a run's do.
            async with self._gateway.relay(client) as relay:
                if relay is not None:
                    relay.follow(target.server)
                result = await calls.result(target, [], arguments, on_progress=progress, caller=caller)
        except ModelError as e:
            return error_result(str(e))
        cache = self._management.cache
        return cut_result(_unstamped(result), max_chars, cache, target.output_schema)

    async def _search_or_call(
        self, name: str, arguments: dict[str, Any], client: RequestClient | None
    ) -> types.CallToolResult:
        try:
            bound = await _SEARCH_SCHEMAS[name].bind(name, [], arguments)
            if name == SEARCH_TOOLS:
                await self._gateway.index.ready()
                answer = search_tools(self._gateway.index, bound, self.catalogue().names)
                return data_answer(answer, compact=True)
            target, inner = call_target(bound)
        except ModelError as e:
            return error_result(str(e))
        if target in RESERVED:
            return error_result(f"{CALL_TOOL} calls the upstream tools {SEARCH_TOOLS} finds; call {target!r} itself")
        return await self.call(target, inner, client)

    def _lookup(self, name: str, server: str | None, registry: Registry) -> UpstreamTool:
        target = self.catalogue().tools.get(name)
        if target is not None:
            return target
        if server is not None:
            # Named, but listed nowhere: a server held for review, or down (a lost connection lists no tools, and
            # the call path waits for a connecting one and tries to reconnect a lost one).
            tool = name[len(mcp_name(server)) + len(self._separator) :]
            if (refused := registry.sight_server(server).refusal(tool)) is not None:
                raise refused
        raise UnknownTool(self.catalogue().unknown(name))

    def _server_of(self, name: str) -> str | None:
        """The server ``name`` would be a tool of (``server<separator>tool``), among those shown and those held for
        review: the longest such name."""
        registry = self._gateway.registry
        servers = [
            s
            for s in (*(s.name for s in registry.servers()), *registry.held)
            if name.startswith(mcp_name(s) + self._separator)
        ]
        return max(servers, key=lambda s: len(mcp_name(s)), default=None)

    def input_schema(self, name: str) -> dict[str, Any] | None:
        if name == "run":
            return RUN_INPUT_SCHEMA
        if name in self._management.tools:
            return self._management.tools[name].input_schema
        if name in _SEARCH_SCHEMAS:
            return _SEARCH_SCHEMAS[name].schema
        target = self.catalogue().tools.get(name)
        return dict(target.schema.schema) if target else None


_SEARCH_SCHEMAS = {t.name: ToolSchema(t.input_schema) for t in (SEARCH_TOOLS_TOOL, CALL_TOOL_TOOL)}


def _unstamped(result: types.CallToolResult) -> types.CallToolResult:
    """The upstream's result as it sent it (not reshaped), less the 2026 era's ``serverInfo`` stamp.

    That stamp names the server answering on this connection, which is OneTool: the SDK stamps ours on 2026-era
    replies, and handshake-era replies carry none.
    """
    meta = result.meta
    if not meta or SERVER_INFO_META_KEY not in meta:
        return result
    rest = {k: v for k, v in meta.items() if k != SERVER_INFO_META_KEY}
    return result.model_copy(update={"meta": rest or None})


def build_direct_server(
    gateway: Gateway, separator: Separator = ":", management: Management = "propose", expose: Exposure = "all"
) -> Server[dict[str, Any]]:
    """The /mcp/direct MCP server: list_changed to both eras whenever ``gateway.subscribe()`` fires;
    ``management`` is what its management tools let a model do (``direct.management``); ``expose`` whether it
    lists every upstream tool or only its management tools, ``search_tools`` and ``call_tool`` among them."""
    face = DirectFace(gateway, separator, management, expose)
    server = face_server(
        "direct",
        gateway.subscribe,
        gateway.drain,
        settled=gateway.settled,
        traced=gateway.config.otel is not None,
        items=items_of(gateway),
        on_list_tools=face.list_tools,
        on_call_tool=face.call_tool,
        get_tool_input_schema=face.input_schema,
        on_roots_changed=gateway.roots_changed,
    )
    face.levels.install(server)
    return server
