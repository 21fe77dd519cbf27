"""The ``run`` tool's description: how to use it, its limits, and every pack's tools.

This text is all a model sees of OneTool, and it is sent on every turn, so it teaches by example (a call of a tool
it can call: :func:`example`) and stays within :data:`BUDGET_BYTES` as the client receives it. Each tool is listed
under its pack as ``tool(arg: type = default) -> shape # first sentence`` while everything fits; when it does not,
the packs give up detail as :mod:`onetool.core.listing` says, the compact form being ``tool(arg, opt?) # purpose``.
Names and parameter names go last: with them a model can write the call, and ``proxy.describe("pack.tool")`` gives
the rest. Whatever the size, the text says that ``proxy.search`` finds tools by task, which is how a model meets a
catalogue too large to list.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from onetool.core.listing import Level, Levels, fit, gist, json_size
from onetool.registry import LocalTool, Pack, Registry, Tool, UpstreamTool
from onetool.registry.results import is_envelope_schema
from onetool.schemas.walk import object_view
from onetool.text import one_line
from sandbox import ALLOWED_MODULES, Limits

__all__ = ["BUDGET_BYTES", "INSTRUCTIONS_CHARS", "describe_run", "example", "intro"]

INSTRUCTIONS_CHARS = 300
"""A server's own instructions, as shown under its pack (in full: proxy.list_servers())."""
BUDGET_BYTES = 2_725
"""The whole description, JSON-escaped UTF-8 as a client receives it (about 700 tokens): with the ``run`` tool's
name and schema and the result's own keys (about 265 bytes), a tools/list under 3,000 bytes at any catalogue
size. The four reference servers' 42 tools (server-everything lists 4 more to a client that can elicit, sample
and list roots, as the gateway's pool can) are all listed with their names and parameters: 90 % less than the
same tools listed directly."""

_MODULES = ", ".join(ALLOWED_MODULES)
_SHORTENED = (
    'Shortened to fit: proxy.search("task") finds tools, proxy.list_tools(server="name") lists a pack\'s tools, '
    'proxy.describe("pack.tool") gives one tool\'s types and description.'
)

_PLACEHOLDERS = {"string": '"..."', "integer": "1", "number": "1.0", "boolean": "True", "array": "[]", "object": "{}"}
"""What the example passes for a required argument of each JSON type (the model fills in real values)."""
_PLAIN = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,29}\Z")
"""A name the example may quote as it is: an upstream chose it, and the description is the model's."""
_MAX_EXAMPLE_ARGS = 3
_MAX_EXAMPLE_CHARS = 120
"""The example's call line, at most: it is part of the description's fixed head, which no shortening cuts."""
_PROXY_EXAMPLE = (
    "servers = proxy.list_servers()",
    '[s["name"] for s in servers if s["status"] == "connected"]',
)
"""With no other pack: the one whose results' shape is known."""
_PLAIN_EXAMPLE = ("squares = [n * n for n in range(10)]", "sum(squares)")
"""With no pack at all: the snippet is plain Python."""


def intro(limits: Limits, shown: tuple[str, str] = _PROXY_EXAMPLE) -> str:
    """The fixed part of the description, with ``shown`` (two lines of code: :func:`example`) as its example."""
    return f"""\
Run Python that calls tools as `pack.tool(arg=value)`. Only the last expression's value and print() output come \
back: filter and trim in code. A failed call raises ToolError; bad names, arguments and syntax are reported \
before anything runs. Imports: {_MODULES}; no files, network or processes. `parallel(lambda: a.x(), lambda: \
b.y())` runs calls at once; `progress(done, total, message)` reports progress. Limits per run: \
{limits.timeout:g} s, {limits.max_calls} calls, output cut at {limits.max_output:,} characters.
Example:
  {shown[0]}
  {shown[1]}
In listings `b?` is optional, `{{a: str}}` a dict, `-> T` the result.
Find tools for a task: proxy.search("what you need") gives the best, with signatures."""


def example(registry: Registry) -> tuple[str, str]:
    """Two lines of a snippet that calls a tool of ``registry``: a server's, read-only and with few required
    arguments if one is there, else a local pack's; with no pack but ``proxy``, a look at the servers; with no
    pack at all, plain Python. Never a pack the gateway does not have."""
    candidates = [
        (_rank(tool), i, call, tool)
        for i, pack in enumerate(p for p in registry.packs.values() if p.server is not None or p.name != "proxy")
        for tool in pack.tools.values()
        if (call := _call(tool)) is not None
    ]
    if not candidates:
        return _PROXY_EXAMPLE if "proxy" in registry.packs else _PLAIN_EXAMPLE
    *_, call, tool = min(candidates, key=lambda c: c[:2])
    field = _result_field(tool)
    return f"result = {call}", f'result["{field}"]' if field else "result"


def _rank(tool: Tool) -> tuple[bool, bool, bool, bool, int]:
    """Lowest first: a server's tool, read-only, whose result has fields to pick, that shows an argument, with the
    fewest required arguments (the example teaches a call and a selection)."""
    if not isinstance(tool, UpstreamTool):
        return True, True, True, True, 0
    read_only = bool((tool.annotations or {}).get("read_only_hint"))
    required = len(tool.schema.required)
    return False, not read_only, _result_field(tool) is None, required == 0, required


def _call(tool: Tool) -> str | None:
    """``pack.tool(a="...", n=1)`` with every required argument, or None when the tool needs more than a few,
    names one the example could not write as a keyword, or has a name too long to show."""
    if isinstance(tool, UpstreamTool):
        required: list[tuple[str, Any]] = [(name, tool.schema.properties.get(name)) for name in tool.schema.required]
    elif isinstance(tool, LocalTool):
        params = tool.parameters.parameters.values()
        required = [(p.name, None) for p in params if p.default is p.empty and p.kind is p.POSITIONAL_OR_KEYWORD]
    else:
        return None
    if len(required) > _MAX_EXAMPLE_ARGS or not all(_PLAIN.match(name) for name, _ in required):
        return None
    args = ", ".join(f"{name}={_placeholder(schema)}" for name, schema in required)
    call = f"{tool.pack}.{tool.name}({args})"
    return call if len(call) <= _MAX_EXAMPLE_CHARS else None


def _placeholder(schema: Any) -> str:
    kind = schema.get("type") if isinstance(schema, Mapping) else None
    return _PLACEHOLDERS.get(kind, '"..."') if isinstance(kind, str) else '"..."'


def _result_field(tool: Tool) -> str | None:
    """A field the tool's result has (its output schema says so), for the example to pick from it."""
    schema = tool.output_schema if isinstance(tool, UpstreamTool) else None
    if schema is None or is_envelope_schema(schema):
        return None
    view = object_view(schema)
    return next((name for name in (view.properties or {}) if _PLAIN.match(name)), None) if view else None


def describe_run(registry: Registry, limits: Limits, budget: int = BUDGET_BYTES) -> str:
    head = intro(limits, example(registry))
    packs = list(registry.packs.values())
    if not packs:
        return head + "\n\nNo packs are available."
    room = budget - json_size(f"{head}\n\nPacks:\n{_SHORTENED}")
    lines, shortened = fit({p.name: p for p in packs}, _levels(registry), room)
    return "\n".join([head, "", "Packs:", *lines, *([_SHORTENED] if shortened else [])])


def _levels(registry: Registry) -> Levels[Pack]:
    """A pack's listing at each level of detail (:mod:`onetool.core.listing`)."""

    def header(pack: Pack) -> str:
        status = registry.pack_status(pack)
        note = ""
        if status is not None and not status.connected:
            # A server still connecting has no error yet: "[server connecting]".
            note = f" [server {status.status}: {status.error}]" if status.error else f" [server {status.status}]"
        return f"{pack.name}:{note}"

    def full(pack: Pack) -> str:
        lines = [header(pack)]
        status = registry.pack_status(pack)
        if status is not None and status.instructions:
            lines.append(f"  # {one_line(status.instructions, INSTRUCTIONS_CHARS)}")
        for tool in pack.tools.values():
            summary = f" # {tool.summary}" if tool.summary else ""
            lines.append(f"  {tool.signature.removeprefix(f'{pack.name}.')}{summary}")
        return "\n".join(lines)

    def compact(purpose: int) -> Level[Pack]:
        """``tool(a, b?) # purpose`` per line, purposes cut to ``purpose`` characters (0: none); a server's
        instructions are left to proxy.list_servers()."""

        def at(pack: Pack) -> str:
            lines = [header(pack)]
            for name, tool in pack.tools.items():
                said = tool.purpose(purpose) if purpose else ""
                lines.append(f"  {name}({tool.params})" + (f" # {said}" if said else ""))
            return "\n".join(lines)

        return at

    def count(pack: Pack) -> str:
        n = len(pack.tools)
        return f"{header(pack)} {n} tool{'' if n == 1 else 's'}"

    def about(pack: Pack) -> str:
        """``github: 26 tools (pull, request, issue...)``: a pack's one-line purpose."""
        words = gist(pack.tools, pack.name)
        return f"{count(pack)} ({', '.join(words)})" if words else count(pack)

    return Levels(
        full=full,
        compact=compact,
        names=lambda pack: f"{count(pack)}: {', '.join(pack.tools)}",
        gist=about,
        count=count,
        rest=lambda left: f"... and {left} more pack{'' if left == 1 else 's'}: proxy.list_servers() lists them.",
    )
