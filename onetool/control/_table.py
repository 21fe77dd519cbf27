"""The control plane's table: each server as the config file and the state store make it (:class:`LiveServer`), and
:func:`merge`, which builds the whole table from a config and a snapshot of the store. The control plane holds one
table and replaces its rows only through ``Live._apply`` (:mod:`onetool.control._live`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from onetool.config import Config, ServerConfig, ToolFilter, to_identifier, validate_server
from onetool.control._bridging import Bridging
from onetool.control._trust import Trust
from onetool.errors import ConfigError
from onetool.logs import logger
from onetool.state.records import Actor

if TYPE_CHECKING:
    from onetool.state import Snapshot

__all__ = ["LiveServer", "merge"]


@dataclass
class LiveServer:
    config: ServerConfig
    """As the config file or the add gave it."""
    added_by: Actor | None
    enabled: bool
    trust: Trust
    bridged: ServerConfig | None = None
    """For a converted server: the entry the pool connects instead of ``config`` (the bridge's URL)."""
    proposed: bool = False
    """A model's proposal no operator approved yet: never in the pool."""
    enabled_by: Actor | None = None
    """Who last enabled or disabled it (None: nobody, the config or the add decides)."""
    version: int = 0
    """The version of its overrides in the store this gateway knows (0: none): each change is written over it."""
    spec: dict[str, Any] | None = None
    """An added server's entry as stored (what an edit changes); None for a config-file server."""
    tools_set: ToolFilter | None = None
    """The tools filter set at run time (``onetool servers tools``): it replaces the entry's own."""

    @property
    def offered(self) -> ToolFilter:
        """Which of its tools are offered: the run-time filter, else the entry's own."""
        return self.tools_set if self.tools_set is not None else self.config.tools

    def pool_config(self) -> ServerConfig:
        connect = self.bridged or self.config
        update: dict[str, Any] = {}
        if connect.enabled != self.enabled:
            update["enabled"] = self.enabled
        if connect.sampling is None:
            # A server added at run time (perhaps at a model's proposal) spends no client's model unless its
            # entry says so.
            update["sampling"] = "forward" if self.added_by is None else "deny"
        return connect.model_copy(update=update) if update else connect

    def connection(self) -> tuple[bool, dict[str, Any]]:
        """What the pool's connection depends on: a change here reconnects the server, any other (its tools
        filter, its quarantine) only changes what faces show."""
        return self.proposed, self.pool_config().model_dump(exclude={"tools", "quarantined"})


async def merge(config: Config, snapshot: Snapshot, bridging: Bridging, *, quiet: bool) -> dict[str, LiveServer]:
    """The config's servers with the store's: added servers, overrides, approvals, conversions."""
    servers: dict[str, tuple[ServerConfig, Actor | None, bool, dict[str, Any] | None]] = {
        name: (s, None, False, None) for name, s in config.servers.items()
    }
    packs = {to_identifier(name): name for name in servers}
    for name, added in snapshot.added.items():
        if to_identifier(name) in packs:
            if quiet:
                continue
            logger.warning(
                "server '{}' (added by {}) clashes with '{}' in the config file: the file's server is used",
                name,
                added.added_by,
                packs[to_identifier(name)],
            )
            continue
        try:
            servers[name] = (validate_server(name, added.spec), added.added_by, added.proposed, dict(added.spec))
        except ConfigError as e:
            if not quiet:
                logger.error("{}; remove it with `onetool servers remove {}`", e, name)
            continue
        packs[to_identifier(name)] = name
    overrides, approvals = snapshot.overrides, snapshot.approvals
    loaded: dict[str, LiveServer] = {}
    for name, (server, added_by, proposed, spec) in servers.items():
        o = overrides.get(name)
        enabled = server.enabled if o is None or o.enabled is None else o.enabled
        quarantined = server.quarantined if o is None or o.quarantined is None else o.quarantined
        approved_at = o.approved_at if o is not None else None
        approved = approvals.get(name, {}) if approved_at is not None else {}
        trust = Trust(quarantined, approved_at, approved, snapshot.rejections.get(name, {}))
        enabled_by = o.enabled_by if o is not None else None
        version = o.version if o is not None else 0
        loaded[name] = LiveServer(
            server,
            added_by,
            enabled,
            trust,
            proposed=proposed,
            enabled_by=enabled_by,
            version=version,
            spec=spec,
            tools_set=stored_filter(name, o.tools if o is not None else None, quiet=quiet),
        )
    for name, entry in (await bridging.entries({n: s.config for n, s in loaded.items()})).items():
        loaded[name].bridged = entry
    return loaded


def stored_filter(name: str, stored: Mapping[str, Any] | None, *, quiet: bool) -> ToolFilter | None:
    """The run-time tools filter the store holds; one that no longer validates is dropped, and said so once."""
    if stored is None:
        return None
    try:
        return ToolFilter.model_validate(stored)
    except ValueError as e:
        if not quiet:
            logger.error("server '{}': ignoring the stored tools filter ({}); set it again", name, e)
        return None
