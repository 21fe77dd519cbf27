"""``?filter=github,myserver__echo``: which packs and tools the typed module describes.

A name selects a whole pack (by pack or server name); ``server__tool`` selects one tool (by the name a snippet
uses or the upstream's own). A name that matches nothing is left out, so a filter of unknown names gives an
empty module.
"""

from __future__ import annotations

from collections.abc import Sequence

from onetool.registry import Pack, Registry, Tool, UpstreamTool


def parse_filter(text: str | None) -> list[str] | None:
    """The comma-separated names of a filter; None (every pack) when there is none or it is blank."""
    names = [n.strip() for n in (text or "").split(",") if n.strip()]
    return names or None


def select(registry: Registry, names: Sequence[str] | None) -> list[tuple[Pack, list[Tool]]]:
    """The packs ``names`` selects, each with the selected tools, in the registry's order."""
    if names is None:
        return [(pack, list(pack.tools.values())) for pack in registry.packs.values()]
    chosen: dict[str, set[str] | None] = {}  # pack -> tool names, None for all of them
    for name in names:
        pack = _pack(registry, name)
        if pack is not None:
            chosen[pack.name] = None
            continue
        # A pack name may itself hold "__": try every split, leftmost first.
        start = name.find("__")
        while start > 0:
            pack = _pack(registry, name[:start])
            tool = _tool(pack, name[start + 2 :]) if pack is not None else None
            if pack is not None and tool is not None:
                picked = chosen.setdefault(pack.name, set())
                if picked is not None:
                    picked.add(tool.name)
                break
            start = name.find("__", start + 1)
    selected: list[tuple[Pack, list[Tool]]] = []
    for pack in registry.packs.values():
        if pack.name in chosen:
            picked = chosen[pack.name]
            selected.append((pack, [t for t in pack.tools.values() if picked is None or t.name in picked]))
    return selected


def _pack(registry: Registry, name: str) -> Pack | None:
    found = registry.packs.get(name)
    return found or next((p for p in registry.packs.values() if p.server == name), None)


def _tool(pack: Pack, name: str) -> Tool | None:
    found = pack.tools.get(name)
    return found or next(
        (t for t in pack.tools.values() if isinstance(t, UpstreamTool) and t.remote_name == name), None
    )
