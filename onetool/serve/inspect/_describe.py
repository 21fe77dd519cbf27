"""What ``inspect`` tells the model: its own description (every server and tool, within a budget), and tool schemas
on request.

The input is plain data (:class:`InspectServer`, :class:`InspectTool`, or anything shaped like them), so this module
knows nothing of the registry or the pool (it cuts a summary as the registry does: ``brief``). Quarantined, disabled
and failed servers are invisible; the failed ones are named in one closing line so the model knows they exist but
cannot be used now.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar

from onetool.config import DEFAULT_MAX_DESCRIPTION_LEN
from onetool.core.listing import Level, Levels, fit, gist, json_size
from onetool.errors import UnknownPack, UnknownTool, UpstreamUnavailable
from onetool.registry import brief
from onetool.serve.inspect.compress import compress
from onetool.text import closest, one_line, shown_name

INSTRUCTIONS_MAX_CHARS = 300
HIDDEN_STATES = frozenset({"quarantined", "disabled", "failed"})
_SHOWN_STATES = frozenset({"connected"})
"""States listed without a note; any other visible state (connecting, disconnected) is shown in brackets."""
_MAX_NAME = 128
"""MCP names are at most 128 characters; a longer one is cut rather than let fill the description."""
_MAX_SUMMARY = 160
_MAX_FAILED = 300
"""The closing line's names of failed servers, at most (a catalogue of hundreds can have many)."""
BUDGET_BYTES = 5_000
"""The whole description, JSON-escaped UTF-8 as a client receives it (about 1,250 tokens): the four reference
servers' tools are listed in full, each with its first sentence; a larger catalogue gives up detail to stay
within it (``inspect(query=...)`` finds what the listing no longer names)."""
_SHORTENED = (
    'Shortened to fit: inspect(query="a task") finds the best tools of every server, inspect(server_name) lists '
    "a server's tools."
)

INTRO = """\
Inspect the tools of the MCP servers below, then call one with exec(server_name, tool_name, arguments).
inspect(server_name) returns the name, description and argument types of every tool of that server; \
inspect(server_name, tool_name) returns one tool's; inspect(query="a task in a few words") finds the best tools \
for it on every server. Types are TypeScript-style: \
{name: string, limit?: integer = 10 /* description */} (? marks an optional argument, = its default)."""


class ToolLike(Protocol):
    @property
    def name(self) -> str: ...
    @property
    def summary(self) -> str:
        """One line: the description's first sentence."""

    @property
    def description(self) -> str: ...
    @property
    def input_schema(self) -> Mapping[str, Any]: ...
    @property
    def output_schema(self) -> Mapping[str, Any] | None: ...


# Generic in its tools, so find_tool gives back the caller's own tool type.
ToolT_co = TypeVar("ToolT_co", bound=ToolLike, covariant=True)


class ServerLike(Protocol[ToolT_co]):
    @property
    def name(self) -> str: ...
    @property
    def instructions(self) -> str | None: ...
    @property
    def status(self) -> str:
        """``connected`` for a usable server or local pack; ``failed``, ``disabled``, ``quarantined`` hide it."""

    @property
    def tools(self) -> Sequence[ToolT_co]: ...


@dataclass(frozen=True)
class InspectTool:
    name: str
    summary: str
    description: str = ""
    input_schema: Mapping[str, Any] = field(default_factory=lambda: {"type": "object", "properties": {}})
    output_schema: Mapping[str, Any] | None = None


@dataclass(frozen=True)
class InspectServer(Generic[ToolT_co]):
    """A server as inspect shows it; generic in its tools, so exec gets back the catalogue's own tool type."""

    name: str
    tools: Sequence[ToolT_co]
    instructions: str | None = None
    status: str = "connected"


def describe_inspect(servers: Iterable[ServerLike[ToolLike]], budget: int = BUDGET_BYTES) -> str:
    """The ``inspect`` tool's description: one line per server, then one line per tool of it, given up detail as
    :mod:`onetool.core.listing` says where that does not fit in ``budget`` bytes."""
    servers = list(servers)
    visible = {str(i): s for i, s in enumerate(servers) if s.status not in HIDDEN_STATES}
    failed = [one_line(s.name, _MAX_NAME) for s in servers if s.status == "failed"]
    tail = [f"Unavailable (failed to connect): {one_line(', '.join(failed), _MAX_FAILED)}"] if failed else []
    head = [INTRO, "", "Available tools:"]
    if not visible:
        return "\n".join([*head, "  (no servers are available)", *tail])
    room = budget - json_size("\n".join([*head, _SHORTENED, *tail])) - 2
    lines, shortened = fit(visible, _LEVELS, room)
    return "\n".join([*head, *lines, *([_SHORTENED] if shortened else []), *tail])


def _header(server: ServerLike[ToolLike]) -> str:
    line = f"  Server: {one_line(server.name, _MAX_NAME)}"
    if server.status not in _SHOWN_STATES:
        line += f" [{one_line(server.status, 40)}]"
    return line


def _full(server: ServerLike[ToolLike]) -> str:
    line = _header(server)
    if server.instructions and server.instructions.strip():
        line += f" - {one_line(server.instructions, INSTRUCTIONS_MAX_CHARS)}"
    lines = [line]
    for tool in server.tools:
        name, summary = one_line(tool.name, _MAX_NAME), one_line(tool.summary, _MAX_SUMMARY)
        lines.append(f"    - {name}: {summary}" if summary else f"    - {name}")
    return "\n".join(lines)


def _compact(purpose: int) -> Level[ServerLike[ToolLike]]:
    """``- tool: purpose`` per line, purposes cut to ``purpose`` characters (0: none), without the server's
    instructions."""

    def at(server: ServerLike[ToolLike]) -> str:
        lines = [_header(server)]
        for tool in server.tools:
            name, said = one_line(tool.name, _MAX_NAME), brief(one_line(tool.summary, _MAX_SUMMARY), purpose)
            lines.append(f"    - {name}: {said}" if purpose and said else f"    - {name}")
        return "\n".join(lines)

    return at


def _count(server: ServerLike[ToolLike]) -> str:
    n = len(server.tools)
    return f"{_header(server)}: {n} tool{'' if n == 1 else 's'}"


def _names(server: ServerLike[ToolLike]) -> str:
    return f"{_count(server)}: {', '.join(one_line(t.name, _MAX_NAME) for t in server.tools)}"


def _gist(server: ServerLike[ToolLike]) -> str:
    words = gist((t.name for t in server.tools), server.name.lower())
    return f"{_count(server)} ({', '.join(words)})" if words else _count(server)


def _rest(left: int) -> str:
    return f"  ... and {left} more server{'' if left == 1 else 's'}: inspect(query=...) finds their tools."


_LEVELS: Levels[ServerLike[ToolLike]] = Levels(
    full=_full, compact=_compact, names=_names, gist=_gist, count=_count, rest=_rest
)


def inspect_schemas(
    servers: Iterable[ServerLike[ToolLike]],
    server: str,
    tool: str | None = None,
    *,
    compression: bool = True,
    max_description_len: int = DEFAULT_MAX_DESCRIPTION_LEN,
) -> dict[str, Any]:
    """What ``inspect(server)`` or ``inspect(server, tool)`` returns.

    A tool is ``{name, description, input, output}``: ``input`` and ``output`` are compressed types (``output``
    None when the tool declares no output schema), or with ``compression=False`` the raw JSON schemas under
    ``inputSchema`` and ``outputSchema``. Unknown names raise UnknownPack / UnknownTool with the closest names;
    a failed server raises UpstreamUnavailable.
    """
    found = find_server(servers, server)
    if tool is None:
        return {"server": found.name, "tools": [_schema(t, compression, max_description_len) for t in found.tools]}
    return _schema(find_tool(found, tool), compression, max_description_len)


ServerT = TypeVar("ServerT", bound=ServerLike[ToolLike])
ToolT = TypeVar("ToolT", bound=ToolLike)


def find_server(servers: Iterable[ServerT], name: str) -> ServerT:
    """The visible server called ``name``; UnknownPack with the closest names, or UpstreamUnavailable if it failed."""
    servers = list(servers)
    for s in servers:
        if s.name == name and s.status == "failed":
            # The stock advice points at proxy.list_servers(), which only run(code) has.
            raise UpstreamUnavailable(
                s.name, "it failed to connect; OneTool keeps retrying, try again later", retrying=False
            )
        if s.name == name and s.status not in HIDDEN_STATES:
            return s
    names = [s.name for s in servers if s.status not in HIDDEN_STATES]
    raise UnknownPack(
        f"unknown server '{shown_name(name)}'.{_did_you_mean(name, names)} "
        f"Available servers: {', '.join(names) or 'none'}"
    )


def find_tool(server: ServerLike[ToolT], name: str) -> ToolT:
    """``server``'s tool called ``name``, or UnknownTool with the closest names and the list of its tools."""
    for t in server.tools:
        if t.name == name:
            return t
    names = [t.name for t in server.tools]
    raise UnknownTool(
        f"server '{server.name}' has no tool '{shown_name(name)}'.{_did_you_mean(name, names)} "
        f"Its tools: {', '.join(names) or 'none'}"
    )


def _schema(tool: ToolLike, compression: bool, max_description_len: int) -> dict[str, Any]:
    if not compression:
        return {
            "name": tool.name,
            "description": tool.description,
            "inputSchema": dict(tool.input_schema),
            "outputSchema": dict(tool.output_schema) if tool.output_schema is not None else None,
        }
    output = tool.output_schema
    return {
        "name": tool.name,
        "description": tool.description,
        "input": compress(tool.input_schema, max_description_len=max_description_len),
        "output": compress(output, max_description_len=max_description_len) if output is not None else None,
    }


def _did_you_mean(name: str, names: Iterable[str]) -> str:
    close = closest(name, names)
    return f" Did you mean '{close[0]}'?" if close else ""
