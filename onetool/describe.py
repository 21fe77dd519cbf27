"""The ``run`` tool's description: how to use it, and every pack as Python signatures.

This text is all a model sees of OneTool, so it teaches by example and lists
each tool as ``pack.tool(arg: type = default)`` with its first sentence. When
the catalogue is large, packs are shortened (signatures only, then names only)
with a pointer to ``proxy.list_tools(server=...)``.
"""

from __future__ import annotations

from onetool.registry import Pack, Registry
from sandbox import ALLOWED_MODULES

BUDGET_CHARS = 12_000

_MODULES = ", ".join(ALLOWED_MODULES)

INTRO = f"""\
Run a short Python snippet that calls tools as functions of packs, and get back only the final value.

Write plain Python: call tools as `pack.tool(arg=value)` (positional arguments follow the listed order), \
combine and filter results in code, and end with an expression: its value is the result, together \
with anything print()ed. Only that value reaches you, so trim large results in the snippet. A failed \
tool call raises ToolError, which you can catch. Allowed imports: {_MODULES}. No files, network or processes.
Independent calls run at once with `parallel(lambda: a.x(), lambda: b.y(k=1))`: results in order; a failure \
raises once all are done, or comes back as a value with return_exceptions=True; in a loop bind the variable, \
`[lambda u=u: f.get(url=u) for u in urls]`. Report progress of long work with `progress(done, total, message)`.

Example:
    sites = wix.list_sites()
    [s["name"] for s in sites if s.get("published")]

Discover more with proxy.list_servers() and proxy.list_tools(server="name")."""


def describe_run(registry: Registry, budget: int = BUDGET_CHARS) -> str:
    packs = list(registry.packs.values())
    if not packs:
        return INTRO + "\n\nNo packs are available."
    # Start from the richest listing; shorten the biggest packs first, each all the way, until it fits.
    detail = {p.name: 2 for p in packs}
    steps = [p.name for p in sorted(packs, key=lambda p: len(p.tools), reverse=True) for _ in range(2)]
    text = _render(packs, detail, registry)
    for name in steps:
        if len(text) <= budget:
            break
        detail[name] -= 1
        text = _render(packs, detail, registry)
    return text


def _render(packs: list[Pack], detail: dict[str, int], registry: Registry) -> str:
    out = [INTRO, "", "Packs:"]
    for pack in packs:
        status = registry.pack_status(pack)
        note = f" [server {status.status}: {status.error}]" if status and not status.connected else ""
        level = detail[pack.name]
        if level == 2:
            out.append(f"{pack.name}:{note}")
            for tool in pack.tools.values():
                summary = f"  # {tool.summary}" if tool.summary else ""
                out.append(f"  {tool.signature}{summary}")
        elif level == 1:
            out.append(f"{pack.name}:{note} (descriptions: proxy.list_tools(server={pack.name!r}))")
            out.extend(f"  {tool.signature}" for tool in pack.tools.values())
        else:
            names = ", ".join(pack.tools)
            out.append(
                f"{pack.name}:{note} {len(pack.tools)} tools: {names} "
                f"(signatures: proxy.list_tools(server={pack.name!r}))"
            )
    return "\n".join(out)
