"""The `run` face (code mode, ``/mcp`` and the default on stdio): one MCP tool, ``run(code)``, which runs a snippet
through the gateway (:mod:`onetool.core.runs`). This module only speaks MCP; serve.list_changed tells clients of
both eras about catalogue changes; serve.stdio and serve.http carry the server.

While a run runs, its client gets its progress and its upstreams' log messages (:mod:`onetool.serve._requests`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

from mcp.server import Server, ServerRequestContext
from mcp.types import CallToolRequestParams, CallToolResult, ListToolsResult, PaginatedRequestParams, Tool

from onetool.core.relay import RunClient
from onetool.logs import logger
from onetool.registry import UpstreamTool
from onetool.registry.results import error_result
from onetool.serve._catalogue_items import items_of
from onetool.serve._paths import DIRECT_ALIAS, DIRECT_PATH
from onetool.serve._requests import LogLevels
from onetool.serve.fanout import face_server
from onetool.text import shown_name

if TYPE_CHECKING:
    from onetool.serve._host import FaceHost, RunHost


INSTRUCTIONS: Final = (
    "OneTool gives you many MCP servers through one tool, `run`: call it with a short Python snippet in which "
    "each server is a pack object, e.g. `time.get_current_time(timezone='UTC')`. Combine and filter results "
    "in code and end with an expression: only its value (and what you print) comes back, so a few calls cost "
    "one round trip. The `run` description lists every pack and tool; mistakes are reported before anything "
    "runs. Independent calls go faster as `parallel(lambda: a.x(), lambda: b.y())`; report progress of long "
    "loops with `progress(done, total)`."
)
"""What the gateway tells an agent about itself at initialize (and server/discover)."""

RUN_INPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "code": {
            "type": "string",
            "description": "Python source to run. The value of the last expression is the result.",
        }
    },
    "required": ["code"],
}


def run_tool(gateway: RunHost) -> Tool:
    """The `run` tool as listed: built per request, since its description names the current upstream catalogue."""
    return Tool(name="run", description=gateway.describe_run(), input_schema=RUN_INPUT_SCHEMA)


async def call_run(
    gateway: RunHost, arguments: dict[str, Any] | None, client: RunClient | None = None, *, face: str = "run"
) -> CallToolResult:
    """A `run` call on ``face`` (any that offers it); ``client`` gets the run's progress and upstream logs."""
    code = (arguments or {}).get("code")
    if not isinstance(code, str):
        got = "nothing" if code is None else type(code).__name__
        return error_result(f"`run` expects a string argument `code` with Python source; got {got}.")
    try:
        return await gateway.run(code, client, face=face)
    except Exception as exc:
        # The gateway promises not to raise; if it does anyway, the client gets a short message and the
        # traceback stays in our log.
        logger.opt(exception=exc).error("gateway.run raised")
        return error_result(f"Internal error in the gateway: {type(exc).__name__}: {exc}")


def unknown_tool(gateway: FaceHost, name: str) -> str:
    """What the run face answers a call of a tool other than ``run``. A ``server:tool`` name (a direct-face name, as
    a client that rewrote /mcp/direct to /mcp sends it) also gets where that name is served, and the snippet that
    calls the same tool here."""
    text = f"Unknown tool {shown_name(name)!r}: this endpoint has one tool, `run`, which runs Python code."
    http = gateway.config.http
    registry = gateway.registry
    prefixed = [s.name for s in registry.servers() if name.startswith(s.name + http.direct_separator)]
    held = [h for h in registry.held if name.startswith(h + http.direct_separator)]
    if held:
        return f"{text} Its {registry.sight_server(max(held, key=len)).refusal()}."
    if not prefixed:
        return text
    server = max(prefixed, key=len)
    if http.enable_direct_endpoint:
        text += (
            f" Names such as {shown_name(name)!r} are those of the direct endpoint: connect to {DIRECT_ALIAS} on this "
            f"gateway (also {DIRECT_PATH}, which some clients rewrite to /mcp) to call each upstream tool by itself."
        )
    remote = name[len(server) + len(http.direct_separator) :]
    for pack in registry.packs.values():
        for tool in pack.tools.values():
            if isinstance(tool, UpstreamTool) and tool.server == server and tool.remote_name == remote:
                call = f"{tool.pack}.{tool.name}"
                return f"{text} Here, call `run` with code `{call}(...)`: proxy.describe('{call}') gives its arguments."
    return text


def build_run_server(gateway: RunHost) -> Server[dict[str, Any]]:
    """The MCP server with one tool, ``run``, backed by ``gateway``."""
    levels = LogLevels()

    async def list_tools(ctx: ServerRequestContext[Any, Any], params: PaginatedRequestParams | None) -> ListToolsResult:
        return ListToolsResult(tools=[run_tool(gateway)])

    async def call_tool(ctx: ServerRequestContext[Any, Any], params: CallToolRequestParams) -> CallToolResult:
        if params.name != "run":
            return error_result(unknown_tool(gateway, params.name))
        return await call_run(gateway, params.arguments, levels.client(ctx))

    server = face_server(
        "run",
        gateway.subscribe,
        gateway.drain,
        settled=gateway.settled,
        traced=gateway.config.otel is not None,
        items=items_of(gateway),
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        # Mcp-Param header validation would otherwise run the tools/list handler on every 2026-era call.
        get_tool_input_schema=lambda name: RUN_INPUT_SCHEMA if name == "run" else None,
        on_roots_changed=gateway.roots_changed,
    )
    # Read at each initialize and server/discover.
    server.instructions = INSTRUCTIONS
    levels.install(server)
    return server
