"""The registry: every pack and tool a snippet can call, resolved by the names snippets use.

Every configured server is a pack named ``to_identifier(server)``; so is every local pack. When both
share a name, the local pack's tools win for the names it defines and the upstream's other tools stay
reachable (the shadowing is logged and listed). A :class:`Registry` is an immutable snapshot; the
gateway builds a new one whenever an upstream catalogue or status changes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from onetool.config import to_identifier
from onetool.errors import ModelError, UnknownPack, UnknownTool
from onetool.logs import logger
from onetool.registry._sight import Sight, Unseen
from onetool.registry._tools import Pack, Tool, UpstreamTool
from onetool.registry.schema import ToolSchema
from onetool.text import closest, shown_name

if TYPE_CHECKING:
    from mcp import types

    from onetool.upstream import ServerStatus, UpstreamPool


class Registry:
    def __init__(
        self,
        packs: Mapping[str, Pack],
        status: Mapping[str, ServerStatus] | None = None,
        held: Mapping[str, str] | None = None,
    ) -> None:
        self.packs = dict(sorted(packs.items()))
        self._status = dict(status or {})
        self.held = dict(held or {})
        """The servers an operator holds for review, each with why (quarantined, proposed): not packs here, but
        a call naming one says so rather than that it is unknown."""
        self._held_packs = {to_identifier(server): server for server in self.held}
        held_packs: dict[str, list[str]] = {name: [] for name in self._held_packs}
        self.tool_names = held_packs | {name: sorted(pack.tools) for name, pack in self.packs.items()}
        """What the sandbox's pack stubs list: a held server's pack lists nothing, and its calls say it is held."""

    def server_status(self, server: str) -> ServerStatus | None:
        return self._status.get(server)

    def pack_status(self, pack: Pack) -> ServerStatus | None:
        """The status of the server behind ``pack``; None for a purely local pack."""
        return self._status.get(pack.server) if pack.server else None

    def resolve(self, pack: str, tool: str) -> Tool:
        """The tool ``pack.tool`` names, or UnknownPack / UnknownTool / ServerHeld / UpstreamUnavailable for the
        model."""
        return self.sight(pack, tool).found(self.unknown(pack, tool), tool)

    def sight(self, pack: str, tool: str) -> Sight:
        """What ``pack.tool``, as a snippet names it, is to a caller (see :mod:`onetool.registry._sight`)."""
        found = self.packs.get(pack)
        if found is None:
            return self._unlisted(pack)
        hit = found.tools.get(tool)
        if hit is not None:
            return Sight(hit, None, found, found.server, self.pack_status(found))
        return self._miss(found)

    def sight_upstream(self, server: str, tool: str) -> Sight:
        """What the tool ``server`` lists as ``tool`` is to a caller; ``server`` as configured (``github-api``) or
        as its pack (``github_api``). A local tool of the same name shadowing it or not, it is the upstream's."""
        pack = next((self.packs.get(s.pack) for s in self._status.values() if server in (s.name, s.pack)), None)
        if pack is None or pack.server is None:
            return self._unlisted(server)
        match = next((t for t in pack.tools.values() if isinstance(t, UpstreamTool) and t.remote_name == tool), None)
        match = match or next((t for t in pack.shadowed.values() if t.remote_name == tool), None)
        if match is not None:
            return Sight(match, None, pack, pack.server, self.pack_status(pack))
        return self._miss(pack)

    def sight_server(self, server: str) -> Sight:
        """What ``server`` (as configured or as its pack) is to a caller, whatever its tools: ``tool`` is always None,
        ``why`` is None for a visible, connected server."""
        status = next((s for s in self._status.values() if server in (s.name, s.pack)), None)
        if status is None:
            return self._unlisted(server)
        why = None if status.connected else Unseen(status.status.value)
        return Sight(None, why, self.packs.get(status.pack), status.name, status)

    def unknown(self, pack: str, tool: str) -> Callable[[Sight], ModelError]:
        """The words of ``run`` (and the pre-check) for an unknown ``pack.tool``: what exists instead."""

        def error(sight: Sight) -> ModelError:
            if sight.pack is None:
                return UnknownPack(f"unknown pack '{pack}'; available packs: {', '.join(self.packs) or 'none'}")
            names = list(sight.pack.tools)
            close = closest(tool, names)
            ordered = close + [n for n in names if n not in close]
            hint = f"; did you mean {close[0]}?" if close else "."
            return UnknownTool(
                f"pack '{pack}' has no tool '{shown_name(tool)}'{hint} Its tools: {', '.join(ordered) or 'none'}"
                f" (see proxy.list_tools(server='{pack}'))"
            )

        return error

    def _unlisted(self, name: str) -> Sight:
        """A name that is no pack here: a server an operator holds for review (named as configured or as its pack),
        or unknown."""
        held = name if name in self.held else self._held_packs.get(name)
        if held is not None:
            return Sight(None, Unseen.HELD, server=held, held=self.held[held])
        return Sight(None, Unseen.UNKNOWN)

    def _miss(self, pack: Pack) -> Sight:
        """``pack`` has no visible tool of the name asked for: its server is down, or the name is unknown."""
        status = self.pack_status(pack)
        why = Unseen.UNKNOWN if status is None or status.connected else Unseen(status.status.value)
        return Sight(None, why, pack, pack.server, status)

    def servers(self) -> list[ServerStatus]:
        """The servers a snippet may know about (a quarantined one is left out), in pool order."""
        return list(self._status.values())

    @classmethod
    def build(
        cls,
        local: Mapping[str, Pack],
        pool: UpstreamPool,
        visible: Callable[[str], Sequence[types.Tool] | None] | None = None,
        held: Mapping[str, str] | None = None,
    ) -> Registry:
        """Merge local packs with the pool's current catalogue (local wins per tool name).

        ``visible(server)`` gives the tools snippets may see and call (default: all the pool has), or None for
        a server that must stay invisible altogether (quarantined): it gets no pack and no status. ``held``: the
        servers an operator holds for review, and why (see :attr:`held`).
        """
        packs = dict(local)
        seen = visible or pool.tools
        catalogue = {s.name: (s, seen(s.name)) for s in pool.status()}
        status = {n: replace(s, tool_count=len(shown)) for n, (s, shown) in catalogue.items() if shown is not None}
        for server, st in status.items():
            upstream = upstream_tools(st.pack, server, catalogue[server][1] or ())
            mine = packs.get(st.pack)
            if mine is None:
                packs[st.pack] = Pack(name=st.pack, tools=upstream, server=server)
                continue
            shadowed = {n: t for n, t in upstream.items() if n in mine.tools}
            packs[st.pack] = Pack(name=st.pack, tools={**upstream, **mine.tools}, server=server, shadowed=shadowed)
        held = {name: why for name, why in (held or {}).items() if to_identifier(name) not in packs}
        return cls(packs, status, held)

    def log_shadowing(self) -> None:
        for pack in self.packs.values():
            if pack.server is not None and any(t.source == "local" for t in pack.tools.values()):
                logger.bind(pack=pack.name, server=pack.server, shadowed=sorted(pack.shadowed)).info(
                    "local pack '{}' shares its name with server '{}': local tools win",
                    pack.name,
                    pack.server,
                )


def upstream_tools(pack: str, server: str, tools: Iterable[types.Tool]) -> dict[str, UpstreamTool]:
    """A server's catalogue as tools of ``pack``, under identifier names."""
    out: dict[str, UpstreamTool] = {}
    for t in tools:
        name = to_identifier(t.name)
        if name in out:
            logger.warning(
                "server '{}': tools '{}' and '{}' both become '{}'; the second is reachable only via proxy.call",
                server,
                out[name].remote_name,
                t.name,
                name,
            )
            continue
        schema = ToolSchema(t.input_schema)
        out[name] = UpstreamTool(
            pack=pack,
            name=name,
            description=(t.description or t.title or "").strip(),
            signature=schema.signature(f"{pack}.{name}", returns=t.output_schema),
            server=server,
            remote_name=t.name,
            schema=schema,
            output_schema=t.output_schema,
            annotations=t.annotations.model_dump(exclude_none=True) if t.annotations else None,
        )
    return out
