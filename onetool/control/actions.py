"""THE table of control verbs: what each does, what it takes, who may use it, what it says when done.

The admin API, the console, ``/mcp/direct``'s ``upstream_servers``, the CLI and the offline store writer are
adapters over this table: each looks a verb up here (:func:`lookup`), checks what it was given with the verb's own
check, and calls it. A new verb, or a new kind of caller, is added here once, and every face offers it with the
same words. The work itself is :class:`onetool.control.ServerControl`'s.

Who may: an operator (the CLI, the admin API, the console) may use every verb; a model (``/mcp/direct``) only the
verbs whose ``models`` mode its ``direct.management`` reaches, and even then the control plane refuses whatever
would undo an operator's decision. Approving and rejecting are an operator's only: a model that could approve could
let in the very servers and tools quarantine holds back.

Light on purpose (nothing here imports the control plane): the CLI builds its parser from this table.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from onetool.errors import ControlError

if TYPE_CHECKING:
    from onetool.config import Management
    from onetool.control._server import ServerControl
    from onetool.control._views import ServerView
    from onetool.state.records import Actor

__all__ = ["ACTIONS", "BUTTON_VERBS", "Action", "lookup", "model_verbs"]

Takes = Literal["nothing", "spec", "patch", "tools", "held tools", "filter"]
"""What a verb is given beside the server's name: nothing; ``spec``, a new server's config entry; ``patch``, a JSON
merge patch of an added server's entry; ``tools``, held tool names (optional); ``held tools``, held tool names (at
least one); ``filter``, ``{"allow": [...] | None, "deny": [...]}`` or None (the entry decides again)."""

Perform = Callable[["ServerControl", str, Any, "Actor"], Awaitable["ServerView | None"]]

_MODES: tuple[Management, ...] = ("read-only", "propose", "full")


@dataclass(frozen=True, slots=True)
class Action:
    """One control verb."""

    verb: str
    summary: str
    """What it does, in a few words (the CLI's help)."""
    done: str
    """What it did, as the past of the verb ("disabled"), for "disabled server 'time'"."""
    perform: Perform
    takes: Takes = "nothing"
    models: Management | None = None
    """The least ``direct.management`` mode that lets a model use it; None: operators only."""
    needs_gateway: str | None = None
    """Why it cannot wait in the state store for the gateway to start; None: it can (see
    :mod:`onetool.control.offline`)."""

    def permits(self, mode: Management) -> bool:
        """Whether a model on a face with ``direct.management: mode`` may use this verb."""
        return self.models is not None and _MODES.index(mode) >= _MODES.index(self.models)

    def check(self, given: Any) -> Any:
        """``given`` as this verb takes it, or a ControlError (400) that says what it takes."""
        if self.takes == "nothing":
            if given is not None:
                raise ControlError(f"{self.verb} takes nothing but the server's name")
            return None
        if self.takes in ("tools", "held tools"):
            if given is None and self.takes == "tools":
                return None
            if not (isinstance(given, list) and given and all(isinstance(t, str) for t in given)):
                needs = "at least one held tool's name" if self.takes == "held tools" else "held tools' names"
                raise ControlError(f'{self.verb}: expected {{"tools": [...]}}, a list of {needs}')
            return given
        if self.takes in ("spec", "patch") and not isinstance(given, Mapping):
            what = "one server entry as in the config" if self.takes == "spec" else "the entry's keys to change"
            raise ControlError(f"{self.verb}: expected an object, {what}")
        return given  # a filter is checked by the rules that apply it (onetool.control._rules.tool_filter)

    async def __call__(
        self, control: ServerControl, name: str, given: Any = None, *, actor: Actor
    ) -> ServerView | None:
        """Do it on ``name`` as ``actor``: the server as it is now (None when it is gone)."""
        return await self.perform(control, name, self.check(given), actor)

    def said(
        self, name: str, view: ServerView | None = None, given: Any = None, before: ServerView | None = None
    ) -> str:
        """What happened, in a sentence for a person; ``before``, the server as it was, tells a change from none."""
        if self.verb in ("enable", "disable") and before is not None and before.enabled == (self.verb == "enable"):
            return f"server '{name}' was already {self.done}"
        if self.verb == "approve" and view is not None and view.launch is not None:
            return f"approved server '{name}' to run; it starts quarantined: review its tools"
        if self.verb == "reject":
            return f"rejected the change of '{name}' {', '.join(given or ())}: it stays hidden"
        if self.verb == "tools":
            return f"{'reset' if given is None else 'set'} the tools filter of server '{name}'"
        return f"{self.done} server '{name}'"


async def _add(control: ServerControl, name: str, spec: Any, actor: Actor) -> ServerView:
    return await control.add(name, spec, actor=actor)


async def _edit(control: ServerControl, name: str, patch: Any, actor: Actor) -> ServerView:
    return await control.edit(name, patch, actor=actor)


async def _remove(control: ServerControl, name: str, _: Any, actor: Actor) -> None:
    await control.remove(name, actor=actor)


async def _enable(control: ServerControl, name: str, _: Any, actor: Actor) -> ServerView:
    return await control.set_enabled(name, True, actor=actor)


async def _disable(control: ServerControl, name: str, _: Any, actor: Actor) -> ServerView:
    return await control.set_enabled(name, False, actor=actor)


async def _restart(control: ServerControl, name: str, _: Any, actor: Actor) -> ServerView:
    return await control.restart(name, actor=actor)


async def _quarantine(control: ServerControl, name: str, _: Any, actor: Actor) -> ServerView:
    return await control.quarantine(name, actor=actor)


async def _approve(control: ServerControl, name: str, tools: Sequence[str] | None, actor: Actor) -> ServerView:
    return await control.approve(name, actor=actor, tools=tools)


async def _reject(control: ServerControl, name: str, tools: Sequence[str], actor: Actor) -> ServerView:
    return await control.reject(name, actor=actor, tools=tools)


async def _convert(control: ServerControl, name: str, _: Any, actor: Actor) -> ServerView:
    return await control.convert(name, actor=actor)


async def _revert(control: ServerControl, name: str, _: Any, actor: Actor) -> ServerView:
    return await control.revert(name, actor=actor)


async def _tools(control: ServerControl, name: str, chosen: Mapping[str, Any] | None, actor: Actor) -> ServerView:
    return await control.set_tools(name, chosen, actor=actor)


_RECORDS_TOOLS = "it records the tools as they are now"

ACTIONS: dict[str, Action] = {
    action.verb: action
    for action in (
        Action("add", "add a server (kept in the state store)", "added", _add, "spec", models="propose"),
        Action(
            "edit",
            "change a server added at run time: only what is given (a running one restarts with it)",
            "edited",
            _edit,
            "patch",
        ),
        Action("remove", "remove a server added at run time", "removed", _remove, models="full"),
        Action("enable", "enable a server", "enabled", _enable, models="full"),
        Action("disable", "disable a server", "disabled", _disable, models="full"),
        Action(
            "restart", "restart a server", "restarted", _restart, models="full", needs_gateway="nothing runs to restart"
        ),
        Action("quarantine", "hide a server's tools until it is approved", "quarantined", _quarantine),
        Action(
            "approve",
            "approve a quarantined server, or its held tools",
            "approved",
            _approve,
            "tools",
            needs_gateway=_RECORDS_TOOLS,
        ),
        Action(
            "reject",
            "reject held tools' changes: they stay hidden, and the same change is not held for review again",
            "rejected",
            _reject,
            "held tools",
            needs_gateway=_RECORDS_TOOLS,
        ),
        Action(
            "convert",
            "serve a stdio server through the bridge (bridge.url) and connect it there",
            "converted",
            _convert,
            needs_gateway="it reconnects the server through the bridge",
        ),
        Action(
            "revert",
            "stop a converted server on the bridge and run it over stdio again",
            "reverted",
            _revert,
            needs_gateway="it reconnects the server over stdio",
        ),
        Action("tools", "set which of a server's tools are offered (a filter)", "filtered", _tools, "filter"),
    )
}


BUTTON_VERBS = tuple(verb for verb, action in ACTIONS.items() if action.takes in ("nothing", "tools", "held tools"))
"""The verbs given nothing but a server's name, and perhaps held tools' names: a button of the console, a
``POST /admin/servers/{name}/{verb}``."""


def lookup(verb: str, among: Iterable[str] | None = None) -> Action:
    """The action ``verb`` names, if it is one of ``among`` (default: every verb); else a ControlError (404) that
    names the verbs there are."""
    offered = list(ACTIONS) if among is None else list(among)
    if verb in offered and verb in ACTIONS:
        return ACTIONS[verb]
    raise ControlError(f"unknown action '{verb}'; actions: {', '.join(offered)}", 404)


def model_verbs(mode: Management) -> tuple[str, ...]:
    """The verbs a model may use on a face with ``direct.management: mode``, in the table's order."""
    return tuple(verb for verb, action in ACTIONS.items() if action.permits(mode))
