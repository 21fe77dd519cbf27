"""Server changes while no gateway runs: straight to the state store, applied when the gateway starts.

Only what needs no live server can wait: add, edit, remove, enable, disable, quarantine, a tools filter. Approval
and rejection record the tools as they are now, and restart, convert and revert change a running connection, so
they need the gateway.
"""

from __future__ import annotations

from typing import Any

from onetool.config import Config
from onetool.control import _rules as rules
from onetool.errors import ControlError, LostRace
from onetool.state import StateStore

__all__ = ["LATER", "change_offline"]

LATER = "applies when the gateway starts"
_NEEDS_GATEWAY = {
    "approve": "it records the tools as they are now",
    "reject": "it records the tools as they are now",
    "restart": "nothing runs to restart",
    "convert": "it reconnects the server through the bridge",
    "revert": "it reconnects the server over stdio",
}


async def change_offline(config: Config, action: str, name: str, spec: dict[str, Any] | None = None) -> str:
    """Record ``action`` on ``name`` in the store (as the CLI); what was done, for the user. ``spec``: the entry
    to add, the merge patch of an edit (see ``rules.edited_server``), or the tools filter to set (None: reset)."""
    if action in _NEEDS_GATEWAY:
        raise ControlError(
            f"no gateway is running, and {action} needs one ({_NEEDS_GATEWAY[action]}); start it with "
            "`onetool serve --http`",
            409,
        )
    async with await StateStore.open(config.store_url) as store:
        added = await store.added_servers()
        names = [*config.servers, *(n for n in added if n not in config.servers)]
        if action == "add":
            _, stored = rules.new_server(name, spec, names, "cli")
            await store.add_server(name, stored, "cli")
            return f"added server '{name}'; {LATER}"
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
            return f"removed server '{name}'; {LATER}"
        if action == "tools":
            chosen = rules.tool_filter(name, spec)
            await store.set_tools(name, chosen.model_dump(mode="json") if chosen is not None else None, "cli")
            return f"{'reset' if chosen is None else 'set'} the tools filter of server '{name}'; {LATER}"
        if action in ("enable", "disable"):
            await store.set_enabled(name, action == "enable", "cli")
        elif action == "quarantine":
            await store.set_quarantined(name, True, "cli")
        else:
            raise ControlError(f"unknown action '{action}'")
        return f"{action}d server '{name}'; {LATER}"


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
