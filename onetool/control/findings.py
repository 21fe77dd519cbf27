"""What the gateway finds in an upstream's tool description: the notes a reviewer reads beside it.

A description is written by the upstream, possibly to steer the model that reads it (tool poisoning). The
review (``quarantine_security``) hands it over as data, escaped, and these findings say what in it deserves a
look: characters a reader cannot see, hidden instruction blocks, requests to read files or secrets, requests to
keep things from the user, URLs, and a change since an operator approved it. They are hints for a human or a
model reviewing the tool, not a verdict: only an operator approves.

The work is bounded: only the first MAX_SCANNED characters are looked at (an upstream's text can be any size),
and each kind reports at most MAX_SHOWN matches, each cut.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections import Counter
from dataclasses import dataclass
from typing import Any, Literal

from onetool.text import label, one_line, unseen, visible

__all__ = ["MAX_SCANNED", "Finding", "scan", "scan_tool"]

MAX_SCANNED = 8_000
"""Characters of a description (and of its schema's text) scanned and shown; the rest is cut."""
MAX_SHOWN = 5
_MATCH_CHARS = 80

Kind = Literal[
    "long_text",
    "hidden_characters",
    "hidden_text",
    "instruction_block",
    "secret_request",
    "concealment",
    "url",
    "changed_since_approval",
]

_TAGS = range(0xE0020, 0xE007F)
"""Tag characters that mirror printable ASCII: invisible text a model may still read."""

_PATTERNS: dict[Kind, re.Pattern[str]] = {
    "instruction_block": re.compile(
        r"<\s*/?\s*(?:important|system|instructions?|secret|hidden|admin|assistant|context)\b[^>\n]{0,40}>"
        r"|\[/?\s*(?:inst|system)\s*\]"
        r"|\b(?:ignore|disregard|forget|override)\s+(?:all\s+|any\s+|the\s+|your\s+)*"
        r"(?:previous|prior|above|earlier|other|system)\s+(?:instructions|prompts?|rules|directions|messages)"
        r"|\bbefore\s+(?:using|calling)\s+(?:this|any)\s+tool\b[^.\n]{0,40}\b(?:must|first|always)\b",
        re.IGNORECASE,
    ),
    "secret_request": re.compile(
        r"~/\.ssh\b|\.ssh/|\bid_(?:rsa|dsa|ecdsa|ed25519)\b|(?<![\w.])\.env\b|\bcredentials?\b|\bapi[\s_-]?keys?\b"
        r"|\bpasswords?\b|\bsecrets?\b|\btokens?\b|\bprivate[\s_-]?keys?\b|/etc/(?:passwd|shadow)\b|\.aws/|\.netrc\b"
        r"|\bmcp\.json\b",
        re.IGNORECASE,
    ),
    "concealment": re.compile(
        r"\b(?:do\s+not|don[’']?t|never|must\s+not|should\s+not)\s+"
        r"(?:tell|mention|inform|reveal|disclose|show|alert|notify|let\s+the\s+user\s+know)\b"
        r"|\bwithout\s+(?:telling|informing|notifying|alerting|asking)\b"
        r"|\b(?:hide|conceal)\b[^.\n]{0,30}\bfrom\b"
        r"|\b(?:user|human)\s+(?:must|should)\s+not\s+(?:know|see|notice)\b",
        re.IGNORECASE,
    ),
    "url": re.compile(r"\b(?:https?|ftp|file|wss?|data):/{0,2}[^\s<>\"'`)\]]+", re.IGNORECASE),
}

_DIALECT = re.compile(r"https?://json-schema\.org/[\w./-]*#?")
"""A JSON Schema dialect's URI (``http://json-schema.org/draft-07/schema#``)."""

_SAYS: dict[Kind, str] = {
    "instruction_block": "text addressed to the model rather than describing the tool",
    "secret_request": "mentions files or secrets a tool should not need",
    "concealment": "asks to keep something from the user",
    "url": "names URLs",
}


Where = Literal["definition", "description", "input_schema"]


@dataclass(frozen=True)
class Finding:
    kind: Kind
    where: Where
    detail: str
    """What was found, in visible characters only."""


def scan_tool(description: str, input_schema: dict[str, Any], *, changed: bool) -> list[Finding]:
    """The findings on one tool: its description, and its input schema (property descriptions can carry the same
    poison); ``changed``: it is held because it changed after an operator approved it."""
    found = []
    if changed:
        found.append(
            Finding("changed_since_approval", "definition", "differs from what an operator approved: see diff")
        )
    found += scan(description, "description")
    found += scan(json.dumps(_without_dialect(input_schema), ensure_ascii=False), "input_schema")
    return found


def _without_dialect(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` without the ``$schema`` that names its JSON Schema dialect (json-schema.org's URL): many servers
    put one on every tool, and a URL finding on each would teach a reviewer to skip URL findings. Any other
    ``$schema`` value is scanned as the rest is."""
    dialect = schema.get("$schema")
    if isinstance(dialect, str) and _DIALECT.fullmatch(dialect):
        return {key: value for key, value in schema.items() if key != "$schema"}
    return schema


def scan(text: str, where: Where) -> list[Finding]:
    """The findings on ``text`` (found in ``where``)."""
    found: list[Finding] = []
    if len(text) > MAX_SCANNED:
        detail = f"{len(text):,} characters; the first {MAX_SCANNED:,} are scanned and shown"
        found.append(Finding("long_text", where, detail))
    head = text[:MAX_SCANNED]
    hidden = Counter("TAG CHARACTERS" if ord(c) in _TAGS else label(c) for c in head if unseen(c))
    if hidden:
        named = ", ".join(f"{name} x{n}" for name, n in hidden.most_common(MAX_SHOWN))
        more = f" and {len(hidden) - MAX_SHOWN} more kinds" if len(hidden) > MAX_SHOWN else ""
        detail = f"{hidden.total()} characters a reader cannot see: {named}{more}"
        found.append(Finding("hidden_characters", where, detail))
    tagged = "".join(chr(ord(c) - 0xE0000) for c in head if ord(c) in _TAGS)
    if tagged:
        found.append(Finding("hidden_text", where, f"tag characters spell: {one_line(tagged, _MATCH_CHARS * 2)!r}"))
    # Hidden characters removed and compatibility forms folded, so "ig\u200bnore" and fullwidth letters still match;
    # the text the tag characters spell is scanned too.
    plain = unicodedata.normalize("NFKC", "".join(c for c in head if not unseen(c)) + "\n" + tagged)
    for kind, pattern in _PATTERNS.items():
        matches = list(dict.fromkeys(one_line(m.group(), _MATCH_CHARS) for m in pattern.finditer(plain)))
        if matches:
            shown = ", ".join(repr(visible(m)) for m in matches[:MAX_SHOWN])
            more = f" and {len(matches) - MAX_SHOWN} more" if len(matches) > MAX_SHOWN else ""
            found.append(Finding(kind, where, f"{_SAYS[kind]}: {shown}{more}"))
    return found
