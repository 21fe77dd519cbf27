"""The ``run`` tool's description: how to use it, its limits, and every pack's tools.

This text is all a model sees of OneTool, and it is sent on every turn, so it teaches by example (a call of a tool
it can call: :func:`example`) and stays within
:data:`BUDGET_BYTES` as the client receives it. Each tool is listed under its pack as ``tool(arg: type = default)
-> shape # first sentence`` while everything fits. When it does not, the listing gives up detail in steps, each taken by
every pack (longest listing first) before any pack takes the next: the compact form ``tool(arg, opt?) # purpose``,
then purposes cut shorter for all, then no purposes, then names only, then a count with what the pack is about
(the words its tools are named by), then a count. Names and parameter names go last: with them a model can write
the call, and ``proxy.describe("pack.tool")`` gives the rest. Whatever the size, the text says that
``proxy.search`` finds tools by task, which is how a model meets a catalogue too large to list.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from onetool.registry import LocalTool, Pack, Registry, Tool, UpstreamTool
from onetool.results import is_envelope_schema
from onetool.schema_walk import object_view
from onetool.text import one_line
from sandbox import ALLOWED_MODULES, Limits

__all__ = ["BUDGET_BYTES", "INSTRUCTIONS_CHARS", "describe_run", "example", "intro", "json_size"]

INSTRUCTIONS_CHARS = 300
"""A server's own instructions, as shown under its pack (in full: proxy.list_servers())."""
BUDGET_BYTES = 2_725
"""The whole description, JSON-escaped UTF-8 as a client receives it (about 700 tokens): with the ``run`` tool's
name and schema and the result's own keys (about 265 bytes), a tools/list under 3,000 bytes at any catalogue
size. The four reference servers' 42 tools (server-everything lists 4 more to a client that can elicit, sample
and list roots, as the gateway's pool can) are all listed with their names and parameters: 90 % less than the
same tools listed directly."""
MAX_PURPOSE_CHARS = 80
"""A tool's purpose in the compact form, at most; cut shorter for all tools when the listing does not fit."""
MIN_PURPOSE_CHARS = 32
"""Cut shorter, a purpose mostly repeats the tool's name: packs drop their purposes instead, longest first."""

_MODULES = ", ".join(ALLOWED_MODULES)
_SHORTENED = (
    'Shortened to fit: proxy.search("task") finds tools, proxy.list_tools(server="name") lists a pack\'s tools, '
    'proxy.describe("pack.tool") gives one tool\'s types and description.'
)
_GIST_WORDS = 5
"""Words a pack's line names what it is about by, at most (the count level)."""
_GENERIC_WORDS = "get list create update delete set add remove search find read write run fetch new retrieve api"
_GENERIC = frozenset(_GENERIC_WORDS.split())
"""Words of tool names that say what is done, not what to: left out of a pack's gist."""

Level = Callable[[Pack, Registry], str]

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


def json_size(text: str) -> int:
    """Bytes of ``text`` inside a JSON string, as a client receives it: escapes and UTF-8 counted."""
    return len(json.dumps(text, ensure_ascii=False).encode()) - 2


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
    lines, shortened = _Listing(packs, registry).fit(room)
    return "\n".join([head, "", "Packs:", *lines, *([_SHORTENED] if shortened else [])])


class _Listing:
    """Every pack's listing at the level of detail chosen for it, and the bytes they take together (kept as
    packs change level: the description is rebuilt on the event loop after every catalogue change)."""

    def __init__(self, packs: Sequence[Pack], registry: Registry) -> None:
        self._packs = {p.name: p for p in packs}
        self._registry = registry
        self.chosen: dict[str, str] = {}
        self._sizes: dict[str, int] = {}
        self._size = 0
        self._take_all(_full)

    def fit(self, room: int) -> tuple[list[str], bool]:
        """The pack lines within ``room`` bytes, and whether any pack is shown with less than everything."""
        if self._size <= room:
            return list(self.chosen.values()), False
        if self._degrade(_compact_at(MAX_PURPOSE_CHARS), room):
            return list(self.chosen.values()), True
        # Every pack is compact and still too long: the longest purposes that fit every pack, if they say enough;
        # else purposes for the packs with the shortest listings only.
        low, high = MIN_PURPOSE_CHARS, MAX_PURPOSE_CHARS - 1
        while low < high:
            middle = (low + high + 1) // 2
            low, high = (middle, high) if self._all_at(_compact_at(middle)) <= room else (low, middle - 1)
        self._take_all(_compact_at(low))
        for level in (_compact_at(0), _names, _gist, _count):
            if self._degrade(level, room):
                return list(self.chosen.values()), True
        return _first_fitting(list(self.chosen.values()), room), True

    def _take(self, name: str, text: str) -> None:
        size = json_size(text) + 2  # + the "\n" that joins it
        self._size += size - self._sizes.get(name, 0)
        self.chosen[name], self._sizes[name] = text, size

    def _take_all(self, level: Level) -> None:
        for name, pack in self._packs.items():
            self._take(name, level(pack, self._registry))

    def _degrade(self, level: Level, room: int) -> bool:
        """Take ``level`` pack by pack, longest listing first, until everything fits; whether it does."""
        for name in sorted(self._sizes, key=self._sizes.__getitem__, reverse=True):
            if self._size <= room:
                return True
            self._take(name, level(self._packs[name], self._registry))
        return self._size <= room

    def _all_at(self, level: Level) -> int:
        return sum(json_size(level(pack, self._registry)) + 2 for pack in self._packs.values())


def _header(pack: Pack, registry: Registry) -> str:
    status = registry.pack_status(pack)
    note = ""
    if status is not None and not status.connected:
        # A server still connecting has no error yet: "[server connecting]".
        note = f" [server {status.status}: {status.error}]" if status.error else f" [server {status.status}]"
    return f"{pack.name}:{note}"


def _full(pack: Pack, registry: Registry) -> str:
    lines = [_header(pack, registry)]
    status = registry.pack_status(pack)
    if status is not None and status.instructions:
        lines.append(f"  # {one_line(status.instructions, INSTRUCTIONS_CHARS)}")
    for tool in pack.tools.values():
        summary = f" # {tool.summary}" if tool.summary else ""
        lines.append(f"  {tool.signature.removeprefix(f'{pack.name}.')}{summary}")
    return "\n".join(lines)


def _compact_at(purpose: int) -> Level:
    """``tool(a, b?) # purpose`` per line, purposes cut to ``purpose`` characters (0: none); a server's
    instructions are left to proxy.list_servers()."""

    def compact(pack: Pack, registry: Registry) -> str:
        lines = [_header(pack, registry)]
        for name, tool in pack.tools.items():
            said = tool.purpose(purpose) if purpose else ""
            lines.append(f"  {name}({tool.params})" + (f" # {said}" if said else ""))
        return "\n".join(lines)

    return compact


def _names(pack: Pack, registry: Registry) -> str:
    return f"{_count(pack, registry)}: {', '.join(pack.tools)}"


def _gist(pack: Pack, registry: Registry) -> str:
    """``github: 26 tools (pull request, issue, repository...)``: the count, and the words most of its tools are
    named by (a pack's one-line purpose)."""
    seen: dict[str, int] = {}
    for name in pack.tools:
        for word in dict.fromkeys(name.lower().split("_")):
            if len(word) > 1 and word not in _GENERIC and word not in pack.name and not word.isdigit():
                seen[word] = seen.get(word, 0) + 1
    top = sorted(seen, key=lambda w: -seen[w])[:_GIST_WORDS]
    return f"{_count(pack, registry)} ({', '.join(top)})" if top else _count(pack, registry)


def _count(pack: Pack, registry: Registry) -> str:
    count = len(pack.tools)
    return f"{_header(pack, registry)} {count} tool{'' if count == 1 else 's'}"


def _first_fitting(lines: list[str], room: int) -> list[str]:
    """As many pack lines as fit, and how many packs are left out (only for hundreds of packs)."""
    kept: list[str] = []
    used = 0
    for i, line in enumerate(lines):
        left = len(lines) - i
        rest = f"... and {left} more pack{'' if left == 1 else 's'}: proxy.list_servers() lists them."
        if used + json_size(line) + json_size(rest) + 4 > room:
            return [*kept, rest]
        kept.append(line)
        used += json_size(line) + 2
    return kept
