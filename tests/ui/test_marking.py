"""Every template of the console marks the characters a reader would not see, in whatever it prints (the one rule:
the environment's finalize), keeps the line breaks of text meant to have them, and sends a form's value back exact.
Rendered here with hostile data in every field an upstream or a model writes; tests/gateway/test_hostile_trust.py
reads the pages of a real gateway."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any

import pytest

from onetool.config import validate_server
from onetool.control import HeldTool, ServerView
from onetool.control._views import launch
from onetool.logs.runs import RunRecord
from onetool.metrics import CallSummary
from onetool.serve.ui._pages import _templates
from onetool.serve.ui._review import review
from onetool.state.records import AuditEntry
from onetool.text import unseen

HOSTILE = "a\x1b]52;c;eA==\x07b\u202ec\u200bd\ne"
MARKED = "a&lt;U+001B CONTROL&gt;]52;c;eA==&lt;U+0007 CONTROL&gt;b&lt;U+202E RIGHT-TO-LEFT OVERRIDE&gt;c"
HIDDEN_FIELD = re.compile(r'<input type="hidden" name="tool" value="([^"]*)">')


def view(name: str = "srv", **changes: Any) -> ServerView:
    fields: dict[str, Any] = {
        "name": name,
        "pack": "srv",
        "type": "stdio",
        "status": "failed",
        "enabled": True,
        "quarantined": False,
        "error": f"crashed: {HOSTILE}",
        "detail": HOSTILE,
        "fix": HOSTILE,
        "tool_count": 1,
        "held_tools": [HOSTILE],
        "protocol_version": HOSTILE,
        "instructions": HOSTILE,
        "stderr": [HOSTILE, HOSTILE],
    }
    return ServerView(**{**fields, **changes})


def render(template: str, **context: Any) -> str:
    session = SimpleNamespace(csrf="t0ken")
    return _templates.get_template(template).render(session=session, flash=(False, HOSTILE), path="/ui/x", **context)


SUMMARY = CallSummary(calls=3, errors=1, p50=0.1, p95=0.2, last_error=HOSTILE, last_error_age=60.0)
PROPOSAL = view(
    "proposed",
    status="proposed",
    launch=launch(validate_server("p", {"command": "npx", "env": {"LD_PRELOAD": HOSTILE}}), values=True),
)
HELD = HeldTool("srv", HOSTILE, "changed after approval", HOSTILE, {"title": HOSTILE}, f"@@ -1 +1 @@\n-{HOSTILE}\n+x")
NEW = HeldTool("srv", "fresh", "server quarantined", HOSTILE, {"title": HOSTILE}, None)
PAGES = {
    "servers.html": {"rows": [(view(HOSTILE), SUMMARY), (PROPOSAL, SUMMARY)], "window": 3600},
    "server.html": {
        "server": {**view(HOSTILE).to_dict(), "launch": PROPOSAL.launch},
        "tools": [{"name": HOSTILE, "description": HOSTILE, "held": True, "rejected": False, "offered": True}],
        "calls": SUMMARY,
    },
    "review.html": {"held": [review(HELD), review(NEW)], "quarantined": [HOSTILE], "proposed": [PROPOSAL]},
    "audit.html": {"entries": [AuditEntry(1, datetime.now(UTC), "mcp", "add_server", HOSTILE, {HOSTILE: HOSTILE})]},
    "runs.html": {
        "runs": [RunRecord("r", datetime.now(UTC), "run", 0.1, 1, "FAILED", "code", HOSTILE, HOSTILE, HOSTILE)],
        "show_code": True,
    },
    "missing.html": {"message": HOSTILE},
    "oauth.html": {
        "rows": [
            {
                "server": HOSTILE,
                "status": HOSTILE,
                "flow": "authorization_code",
                "scopes": HOSTILE,
                "granted": HOSTILE,
                "expires_at": None,
                "refused": HOSTILE,
            }
        ]
    },
}


@pytest.mark.parametrize("template", PAGES)
def test_no_page_shows_a_character_its_reader_would_not_see(template: str) -> None:
    html = render(template, **PAGES[template])
    shown = HIDDEN_FIELD.sub("", html)
    assert not [c for c in shown if unseen(c, keep="\n")], template
    assert MARKED in html, template


def test_a_form_sends_a_held_tools_exact_name_back() -> None:
    html = render("review.html", **PAGES["review.html"])
    assert set(HIDDEN_FIELD.findall(html)) == {HOSTILE.replace('"', "&#34;")}


def test_text_of_many_lines_keeps_its_lines_and_a_name_does_not() -> None:
    html = render("review.html", **PAGES["review.html"])
    assert f"{MARKED}&lt;U+200B ZERO WIDTH SPACE&gt;d\ne</pre>" in html  # the description, in its <pre>
    assert f"{MARKED}&lt;U+200B ZERO WIDTH SPACE&gt;d&lt;U+000A CONTROL&gt;e</code>" in html  # the tool's name
    flagged = render("server.html", **PAGES["server.html"])
    assert "These environment variables change what runs" in flagged and "LD_PRELOAD" in flagged
