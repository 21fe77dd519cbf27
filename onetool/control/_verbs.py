"""The verbs that change a server's entry or whether it runs: add, remove, enable or disable, edit, a tools filter,
restart. Each checks the rules (who may, what is valid), writes the store over the server's version, and applies
the store as the follower does (:meth:`Live.written`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from onetool.control import _rules as rules
from onetool.control._live import Live, log
from onetool.control._views import ServerView, launch
from onetool.errors import ControlError, LostRace
from onetool.state.records import Actor

__all__ = ["Verbs"]


class Verbs:
    def __init__(self, live: Live) -> None:
        self._live = live

    async def add(self, name: str, spec: Mapping[str, Any], *, actor: Actor) -> ServerView:
        live = self._live
        async with live.lock:
            proposed = rules.proposes(actor)
            if proposed:
                limits = live.config.direct
                pending = sum(1 for s in live.servers.values() if s.proposed and s.added_by == actor)
                rules.check_proposal(
                    spec, pending, max_proposals=limits.max_proposals, max_bytes=limits.max_proposal_bytes
                )
            config, stored = rules.new_server(name, spec, live.servers, actor)
            write = live.store.add_server(name, stored, actor, proposed=proposed)
            if proposed:
                return await live.commit(name, write, "proposed", actor, **launch(config))
            return await live.commit(name, write, "added", actor, quarantined=config.quarantined)

    async def remove(self, name: str, *, actor: Actor) -> None:
        live = self._live
        async with live.lock:
            s = live.servers.get(name)
            if s is not None:
                rules.check_model_may_change(name, "remove", actor, s.added_by, s.enabled_by, live.config_path)
            if s is not None and s.added_by is None:
                raise rules.in_config_file(name, live.config_path, watching=live.config.watch)
            # An added server whose stored spec no longer loads is not running, but can still be removed.
            if not await live.store.remove_server(name, actor):
                if s is None:
                    raise rules.unknown(name, live.servers)
                await live.lost(name, LostRace(f"server '{name}' was removed meanwhile (by another replica)"))
            # Removed from the store first, then stopped on the bridge: one that cannot be reached is told in the
            # background.
            await live.bridging.forget(name, actor=actor)
            log(name, "removed", actor)
            await live.written(name)

    async def set_enabled(self, name: str, enabled: bool, *, actor: Actor) -> ServerView:
        live = self._live
        async with live.lock:
            s = live.started(name, "enable" if enabled else "disable", actor)
            if enabled:
                rules.check_usable(name, s.config)
            write = live.store.set_enabled(name, enabled, actor, expected=s.version)
            return await live.commit(name, write, "enabled" if enabled else "disabled", actor)

    async def edit(self, name: str, patch: Mapping[str, Any], *, actor: Actor) -> ServerView:
        """Change an added server's entry (``patch``: see :func:`rules.edited_server`); a running one restarts with
        it, a proposal stays one. Written over the server's version, as every change (a lost race is a 409)."""
        live = self._live
        async with live.lock:
            s = live.require(name)
            rules.check_model_may_change(name, "edit", actor, s.added_by, s.enabled_by, live.config_path)
            converted_to = s.bridged.url if s.bridged is not None else None
            rules.check_editable(
                name,
                from_config=s.spec is None,
                converted_to=converted_to,
                path=live.config_path,
                watching=live.config.watch,
            )
            if s.proposed and isinstance(patch, Mapping):
                rules.check_proposal_edit(name, patch)
            assert s.spec is not None  # an added server's
            _, spec = rules.edited_server(name, s.spec, patch)
            changed = rules.changed_keys(s.spec, spec)
            if not changed:
                return live.view(name)  # nothing to write, nothing to restart
            write = live.store.edit_server(name, spec, actor, changed=changed, expected=s.version)
            return await live.commit(name, write, "edited", actor, keys=changed)

    async def set_tools(self, name: str, tools: Mapping[str, Any] | None, *, actor: Actor) -> ServerView:
        """Offer only the tools ``tools`` (``{"allow": [...] | None, "deny": [...]}``) lets through, whatever the
        server's entry says; ``None`` lets the entry decide again. Faces hear ``tools/list_changed`` at once. An
        operator's tool (admin API, CLI, console): no management tool a model has can reach it."""
        live = self._live
        async with live.lock:
            s = live.require(name)
            chosen = rules.tool_filter(name, tools)
            stored = chosen.model_dump(mode="json") if chosen is not None else None
            write = live.store.set_tools(name, stored, actor, expected=s.version)
            done = "tools filter reset" if chosen is None else "tools filter set"
            return await live.commit(name, write, done, actor, tools=stored)

    async def restart(self, name: str, *, actor: Actor) -> ServerView:
        live = self._live
        async with live.lock:
            s = live.started(name, "restart", actor)
            if not s.enabled:
                raise ControlError(f"server '{name}' is disabled; enable it to start it", 409)
            await live.store.record("restart_server", actor, name)
            log(name, "restarted", actor)
            # A restart changes no state a replica follows: this replica's own connection is started again.
            await live.pool.put(name, s.pool_config())
            await live.written(name)
            return live.current(name)
