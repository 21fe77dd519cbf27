"""What the gateway answers when an upstream asks its user something (``elicitation/create``) during a tool call.

An upstream elicits during one of its tool calls; the caller of that call (the run's client, the direct face's
caller, exec's caller) is asked in its stead when it can be (:data:`Elicit`). The user must know who asks: a
question reaches them behind a first line the gateway writes, naming the asking server as the operator configured
it, with the upstream's message quoted below it (:func:`attributed`), so no upstream can pass its question off as
OneTool's or another server's. The rest of the request (its form, its URL) goes on unchanged; the message is shown
to that client's user by that client and never enters a model's context through the gateway, and nothing a
snippet does can ask or answer one.

When nobody can be asked (``onetool run``, ``POST /admin/run``, a client without the elicitation capability,
several calls to the server in flight so the asker is ambiguous), the answer is decided here from the request
alone (:func:`unattended`): declined, unless the operator set ``servers.NAME.unattended_elicitation: defaults``.
Elicitation asks a person, often for consent, so nobody answers for one by default. With ``defaults``, per
SEP-1034 a field's ``default`` is the value the server proposes when the user gives none: a form whose every
field has a default is accepted with those defaults, as a user who submits the pre-filled form unchanged would;
any other form, and every URL-mode request, is still declined. A user's accepted
answer gets the defaults of the fields it left out (:func:`with_defaults`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import mcp.types as types

from onetool.text import cut, shown_name, visible

__all__ = ["ASKED_BY", "Elicit", "attributed", "quoted", "unattended", "with_defaults"]

ASKED_BY = "[OneTool] MCP server '{}' asks (its own words, quoted below; OneTool does not vouch for them):"
"""The first line of every question an upstream asks a user through the gateway."""
QUOTE = "| "
"""Before each line of the upstream's message: no line of it can pass for the gateway's own."""
MESSAGE_CHARS = 4_000
"""Characters of an upstream's message shown to the user; a longer one is cut, with a note."""

Elicit = Callable[[types.ElicitRequestParams], Awaitable[types.ElicitResult | None]]
"""Asks a call's client the upstream's question: its user's answer, or None when that client cannot be asked."""

_Value = str | int | float | bool | list[str] | None


def _defaults(params: types.ElicitRequestFormParams) -> tuple[dict[str, _Value], bool]:
    """The defaults the form's schema proposes, and whether every field has one."""
    properties = params.requested_schema.get("properties")
    if not isinstance(properties, dict):
        return {}, False
    found: dict[str, _Value] = {}
    for name, field in properties.items():
        if isinstance(field, dict) and "default" in field and _plain(field["default"]):
            found[str(name)] = field["default"]
    return found, len(found) == len(properties)


def _plain(value: Any) -> bool:
    """Whether ``value`` is something an elicitation answer may carry."""
    if isinstance(value, list):
        return all(isinstance(v, str) for v in value)
    return value is None or isinstance(value, str | int | float | bool)


def attributed(server: str, params: types.ElicitRequestParams) -> types.ElicitRequestParams:
    """``params`` as the gateway asks a user: the message under :data:`ASKED_BY` with ``server`` (its configured
    name, which the upstream does not choose), each of its lines quoted, and every character a reader would not see
    named (a carriage return cannot rewrite the line it is on, a bidi override cannot reorder it); cut at
    MESSAGE_CHARS."""
    message = quoted(cut(params.message, MESSAGE_CHARS, "message"))
    return params.model_copy(update={"message": f"{ASKED_BY.format(shown_name(server))}\n{message}"})


def quoted(text: str) -> str:
    """An upstream's words as the gateway shows them to a user: each line behind QUOTE, every character a reader
    would not see named."""
    return "\n".join(QUOTE + line for line in visible(text, keep="\t\n").split("\n"))


def unattended(params: types.ElicitRequestParams, *, defaults_accepted: bool) -> types.ElicitResult:
    """The answer when no user can be asked: decline; with ``defaults_accepted``, accept a form with the defaults
    the server proposed for all of its fields."""
    if defaults_accepted and isinstance(params, types.ElicitRequestFormParams):
        defaults, complete = _defaults(params)
        if complete and defaults:
            return types.ElicitResult(action="accept", content=defaults)
    return types.ElicitResult(action="decline")


def with_defaults(params: types.ElicitRequestParams, result: types.ElicitResult) -> types.ElicitResult:
    """``result`` with the schema's default for each field an accepted form answer left out (SEP-1034)."""
    if result.action != "accept" or not isinstance(params, types.ElicitRequestFormParams):
        return result
    defaults, _ = _defaults(params)
    content = dict(result.content or {})
    missing = {name: value for name, value in defaults.items() if name not in content}
    if not missing:
        return result
    return result.model_copy(update={"content": {**missing, **content}})
