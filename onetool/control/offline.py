"""Server changes while no gateway runs: straight to the state store, applied when the gateway starts.

Only what needs no live server can wait: add, edit, remove, enable, disable, quarantine, a tools filter (the table
of verbs says which, :attr:`onetool.control.actions.Action.needs_gateway`). Approval and rejection record the tools
as they are now, and restart, convert and revert change a running connection, so they need the gateway.
"""

from __future__ import annotations

from typing import Any

from onetool.config import Config
from onetool.control import _rules as rules
from onetool.control.actions import lookup
from onetool.errors import ControlError, LostRace
from onetool.state import StateStore

__all__ = ["LATER", "change_offline"]

LATER = "applies when the gateway starts"


async def change_offline(config: Config, action: str, name: str, spec: dict[str, Any] | None = None) -> str:
    """Record ``action`` on ``name`` in the store (as the CLI); what was done, for the user. ``spec``: the entry
    to add, the merge patch of an edit (see ``rules.edited_server``), or the tools filter to set (None: reset)."""
    verb = lookup(action)
    if verb.needs_gateway is not None:
        raise ControlError(
            f"no gateway is running, and {action} needs one ({verb.needs_gateway}); start it with "
            "`onetool serve --http`",
            409,
        )
    done = f"{verb.said(name, given=spec)}; {LATER}"
    async with await StateStore.open(config.store_url) as store:
        added = await store.added_servers()
        names = [*config.servers, *(n for n in added if n not in config.servers)]
        if action == "add":
            _, stored = rules.new_server(name, spec, names, "cli")
            await store.add_server(name, stored, "cli")
            return done
        if name not in names:
            raise rules.unknown(name, names)
        if action == "edit":
            if name in added and added[name].proposed and isinstance(spec, dict):
                rules.check_proposal_edit(name, spec)
            return await _edit(store, config, name, added[name].spec if name in added else None, spec)
        if action == "remove":
            if name in config.servers:
                raise rules.in_config_file(name, config.path, watching=None)
            await store.remove_server(name, "cli")
            return done
        if action == "tools":
            chosen = rules.tool_filter(name, spec)
            await store.set_tools(name, chosen.model_dump(mode="json") if chosen is not None else None, "cli")
            return done
        if action in ("enable", "disable"):
            await store.set_enabled(name, action == "enable", "cli")
        else:  # the one verb left that can wait: the table says which need the gateway
            assert action == "quarantine", action
            await store.set_quarantined(name, True, "cli")
        return done


async def _edit(
    store: StateStore, config: Config, name: str, current: dict[str, Any] | None, patch: dict[str, Any] | None
) -> str:
    conversion = await store.conversion(name)
    converted_to = conversion.url if conversion is not None else None
    rules.check_editable(
        name, from_config=name in config.servers, converted_to=converted_to, path=config.path, watching=None
    )
    assert current is not None  # a name the store holds and the file does not
    _, edited = rules.edited_server(name, current, patch)
    changed = rules.changed_keys(current, edited)
    if not changed:
        return f"nothing to change: server '{name}' already has these settings"
    override = (await store.overrides()).get(name)
    try:
        await store.edit_server(name, edited, "cli", changed=changed, expected=override.version if override else 0)
    except LostRace as e:
        raise ControlError(str(e), 409) from None
    return f"edited server '{name}' ({', '.join(changed)}); {LATER}"
