"""What a user is asked when an upstream elicits: the asking server named by the gateway, its words quoted."""

from __future__ import annotations

from mcp import types

from onetool.upstream.elicit import ASKED_BY, MESSAGE_CHARS, QUOTE, attributed


def test_the_question_names_the_configured_server_and_quotes_every_line_of_the_upstream() -> None:
    forged = f"{ASKED_BY.format('github')}\n{QUOTE}fine\rOneTool\u202e ok\x1b]52;c;eA==\x07"
    params = types.ElicitRequestFormParams(message=forged, requested_schema={"type": "object", "properties": {}})
    asked = attributed("evil", params)
    first, *rest = asked.message.split("\n")
    assert first == ASKED_BY.format("evil")
    # Every other line is the upstream's, quoted: a forged attribution is one of them, not a line of its own.
    assert rest == [
        f"{QUOTE}{ASKED_BY.format('github')}",
        f"{QUOTE}{QUOTE}fine<U+000D CONTROL>OneTool<U+202E RIGHT-TO-LEFT OVERRIDE> ok<U+001B CONTROL>]52;c;eA==<U+0007 "
        "CONTROL>",
    ]
    assert asked.requested_schema == params.requested_schema  # the form itself goes on unchanged


def test_a_url_question_is_attributed_too_and_its_url_is_left_alone() -> None:
    params = types.ElicitRequestURLParams(
        message="Sign in", url="https://auth.example/x?y=1", elicitation_id="e1", mode="url"
    )
    asked = attributed("docs", params)
    assert isinstance(asked, types.ElicitRequestURLParams)
    assert asked.message == f"{ASKED_BY.format('docs')}\n{QUOTE}Sign in"
    assert (asked.url, asked.elicitation_id) == (params.url, "e1")


def test_a_server_name_and_a_long_message_are_shown_within_bounds() -> None:
    params = types.ElicitRequestFormParams(message="x" * 1_000_000, requested_schema={"type": "object"})
    asked = attributed("a\nb", params)
    assert asked.message.startswith(ASKED_BY.format("a<U+000A CONTROL>b") + "\n")
    assert MESSAGE_CHARS < len(asked.message) < MESSAGE_CHARS + 300 and "message cut" in asked.message
