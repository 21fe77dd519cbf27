"""The ``run`` tool's description: how to use it, its limits, and every pack as Python signatures.

This text is all a model sees of OneTool, and it is sent on every turn, so it teaches by example and stays within
:data:`BUDGET_CHARS`. Each tool is listed as ``pack.tool(arg: type = default) -> shape  # first sentence``. When
that does not fit, the pack whose listing is longest is shortened one step at a time (signatures without
descriptions, then tool names, then only a count) with a pointer to ``proxy.list_tools(server=...)``.
"""

from __future__ import annotations

from collections.abc import Callable

from onetool.registry import Pack, Registry
from onetool.text import one_line
from sandbox import ALLOWED_MODULES, Limits

__all__ = ["BUDGET_CHARS", "INSTRUCTIONS_CHARS", "describe_run", "intro"]

INSTRUCTIONS_CHARS = 300
"""A server's own instructions, as shown under its pack (in full: proxy.list_servers())."""
BUDGET_CHARS = 6_000
"""The whole description: about 1,500 tokens, what 50 typical tools with descriptions take."""

_MODULES = ", ".join(ALLOWED_MODULES)
_SHORTENED = 'Some packs are shortened to fit: proxy.list_tools(server="name") gives their signatures and descriptions.'


def intro(limits: Limits) -> str:
    return f"""\
Run a short Python snippet that calls tools as functions of packs, and get back only the final value.

Write plain Python: call tools as `pack.tool(arg=value)` (positional arguments follow the listed order), \
combine and filter results in code, and end with an expression: its value (and anything print()ed) is all you \
get back, so trim large results in the snippet. A failed call raises ToolError (catchable). Unknown tools or \
arguments and syntax errors are reported before the code runs. Imports: {_MODULES}. No files, network or \
processes. Run independent calls at once: `parallel(lambda: a.x(), lambda: b.y(k=1))` returns their results in \
order (return_exceptions=True returns failures as values; in a loop write `lambda u=u: ...`). \
`progress(done, total, message)` reports progress.

Limits per run: {limits.timeout:g} seconds, {limits.max_calls} tool calls, and the result (and printed output) \
is cut at {limits.max_output:,} characters.

In signatures, `{{a: str, b?: int}}` is a dict whose key b is optional, and `-> T` is what a tool returns.

Example:
    sites = wix.list_sites()
    [s["name"] for s in sites if s.get("published")]

Discover more with proxy.list_servers() and proxy.list_tools(server="name")."""


def describe_run(registry: Registry, limits: Limits, budget: int = BUDGET_CHARS) -> str:
    head = intro(limits)
    packs = list(registry.packs.values())
    if not packs:
        return head + "\n\nNo packs are available."
    # Every pack at each level of detail, richest first. A level is given up by every pack (longest listing
    # first) before any pack drops to the next: all signatures without descriptions beat some packs' names only.
    levels = {p.name: [render(p, registry) for render in _LEVELS] for p in packs}
    chosen = dict.fromkeys(levels, 0)
    room = budget - len(head) - len("\n\nPacks:") - len(_SHORTENED) - 1
    size = sum(len(texts[0]) + 1 for texts in levels.values())
    for level in range(1, len(_LEVELS)):
        for name in sorted(levels, key=lambda n: len(levels[n][level - 1]), reverse=True):
            if size <= room:
                break
            size += len(levels[name][level]) - len(levels[name][chosen[name]])
            chosen[name] = level
    lines = [levels[name][level] for name, level in chosen.items()]
    if size > room:
        lines = _first_fitting(lines, room)
    shortened = [_SHORTENED] if any(chosen.values()) else []
    return "\n".join([head, "", "Packs:", *lines, *shortened])


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
        summary = f"  # {tool.summary}" if tool.summary else ""
        lines.append(f"  {tool.signature}{summary}")
    return "\n".join(lines)


def _signatures(pack: Pack, registry: Registry) -> str:
    return "\n".join([_header(pack, registry), *(f"  {tool.signature}" for tool in pack.tools.values())])


def _names(pack: Pack, registry: Registry) -> str:
    return f"{_header(pack, registry)} {_count(pack)}: {', '.join(pack.tools)}"


def _summary(pack: Pack, registry: Registry) -> str:
    return f"{_header(pack, registry)} {_count(pack)}"


def _count(pack: Pack) -> str:
    return f"{len(pack.tools)} tool{'' if len(pack.tools) == 1 else 's'}"


_LEVELS: list[Callable[[Pack, Registry], str]] = [_full, _signatures, _names, _summary]


def _first_fitting(lines: list[str], room: int) -> list[str]:
    """As many pack lines as fit, and how many packs are left out (only for hundreds of packs)."""
    kept: list[str] = []
    used = 0
    for i, line in enumerate(lines):
        left = len(lines) - i
        rest = f"... and {left} more pack{'' if left == 1 else 's'}: proxy.list_servers() lists them."
        if used + len(line) + len(rest) + 2 > room:
            return [*kept, rest]
        kept.append(line)
        used += len(line) + 1
    return kept
