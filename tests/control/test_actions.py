"""The table of control verbs (onetool.control.actions) is the one list every face offers: the CLI's `servers`
verbs, the admin API's and the console's buttons, what a model may do on /mcp/direct in each mode, and what can
wait for a gateway. Each face's own tests show the verbs working through it."""

from __future__ import annotations

import argparse
from typing import Any

import pytest

from onetool.cli import build_parser
from onetool.control.actions import ACTIONS, BUTTON_VERBS, lookup, model_verbs
from onetool.errors import ControlError
from onetool.serve.direct._manage import ALLOWED


def _servers_verbs() -> dict[str, str | None]:
    """`onetool servers VERB` as the CLI's parser offers them: each verb's help."""
    servers = next(
        a
        for a in build_parser()._subparsers._group_actions  # type: ignore[union-attr]
        if isinstance(a, argparse._SubParsersAction)
    ).choices["servers"]
    [verbs] = [a for a in servers._actions if isinstance(a, argparse._SubParsersAction)]
    return {choice.dest: choice.help for choice in verbs._choices_actions}


def test_the_cli_offers_every_verb_of_the_table_with_its_words() -> None:
    offered = _servers_verbs()
    assert set(offered) == {*ACTIONS, "show"}
    for verb, action in ACTIONS.items():
        if verb != "tools":  # `servers tools` also shows the filter: its help says so
            assert offered[verb] == action.summary


def test_buttons_are_the_verbs_given_only_a_name_or_held_tools() -> None:
    assert BUTTON_VERBS == (
        "remove", "enable", "disable", "restart", "quarantine", "approve", "reject", "convert", "revert"
    )  # fmt: skip


def test_a_model_may_do_what_its_mode_reaches_and_never_approve() -> None:
    assert ALLOWED == {
        "read-only": ("list",),
        "propose": ("list", "add"),
        "full": ("list", "add", "remove", "enable", "disable", "restart"),
    }
    assert model_verbs("full") == ALLOWED["full"][1:]
    for verb in ("approve", "reject", "quarantine", "edit", "tools", "convert", "revert"):
        assert not any(ACTIONS[verb].permits(mode) for mode in ALLOWED), verb


def test_what_needs_a_running_gateway() -> None:
    waits = {verb for verb, action in ACTIONS.items() if action.needs_gateway is None}
    assert waits == {"add", "edit", "remove", "enable", "disable", "quarantine", "tools"}


def test_an_unknown_verb_names_the_verbs_there_are() -> None:
    with pytest.raises(ControlError) as unknown:
        lookup("explode", ("enable", "disable"))
    assert (str(unknown.value), unknown.value.status) == ("unknown action 'explode'; actions: enable, disable", 404)
    with pytest.raises(ControlError, match="unknown action 'add'; actions: enable"):
        lookup("add", ("enable",))  # a verb of the table, but not offered there
    assert lookup("add") is ACTIONS["add"]


@pytest.mark.parametrize(
    ("verb", "given", "error"),
    [
        ("reject", None, 'reject: expected {"tools": [...]}, a list of at least one held tool\'s name'),
        ("reject", [], 'reject: expected {"tools": [...]}, a list of at least one held tool\'s name'),
        ("approve", "lookup", 'approve: expected {"tools": [...]}, a list of held tools\' names'),
        ("approve", [1], 'approve: expected {"tools": [...]}, a list of held tools\' names'),
        ("enable", ["lookup"], "enable takes nothing but the server's name"),
        ("add", ["x"], "add: expected an object, one server entry as in the config"),
        ("edit", None, "edit: expected an object, the entry's keys to change"),
    ],
)
def test_what_a_verb_is_given_is_checked_before_anything_is_done(verb: str, given: Any, error: str) -> None:
    with pytest.raises(ControlError) as refused:
        ACTIONS[verb].check(given)
    assert (str(refused.value), refused.value.status) == (error, 400)


def test_what_a_verb_accepts() -> None:
    assert ACTIONS["approve"].check(None) is None  # the whole server
    assert ACTIONS["approve"].check(["lookup"]) == ["lookup"]
    assert ACTIONS["tools"].check(None) is None  # the entry decides again
    assert ACTIONS["add"].check({"command": "x"}) == {"command": "x"}


def test_what_is_said_when_done() -> None:
    assert ACTIONS["disable"].said("time") == "disabled server 'time'"
    assert (
        ACTIONS["reject"].said("rug", given=["lookup", "find"])
        == "rejected the change of 'rug' lookup, find: it stays hidden"
    )
    assert ACTIONS["tools"].said("time", given=None) == "reset the tools filter of server 'time'"
    assert ACTIONS["tools"].said("time", given={"deny": ["x"]}) == "set the tools filter of server 'time'"
