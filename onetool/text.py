"""Upstream text shown inside OneTool's own text (descriptions, listings): one line, cut; or made visible."""

from __future__ import annotations

import re
import unicodedata

_SPACE = re.compile(r"\s+")


def one_line(text: str, limit: int) -> str:
    """``text`` with its whitespace collapsed, so no upstream string starts a line of its own, cut at ``limit``
    characters with ``...``. Only the head of a huge text is looked at."""
    line = _SPACE.sub(" ", text[: limit * 4 + 16]).strip()
    return line if len(line) <= limit else line[:limit] + "..."


_UNUSUAL = re.compile(r"[^\x20-\x7e]")
_UNSEEN_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"})
_UNSEEN_MARKS = ((0xFE00, 0xFE0F), (0xE0100, 0xE01EF), (0x115F, 0x1160), (0x3164, 0x3164), (0xFFA0, 0xFFA0))
"""Variation selectors and Hangul fillers: they render as nothing, and can carry hidden data."""


def unseen(char: str, keep: str = "\t\n") -> bool:
    """Whether a reader cannot see ``char`` for what it is: a control (but tab and newline), a format character
    (zero-width, bidi controls, tag characters), a surrogate, a private or unassigned code point, a line or
    paragraph separator, a variation selector or a filler. ``keep``: the controls that count as seen."""
    code = ord(char)
    if unicodedata.category(char) in _UNSEEN_CATEGORIES:
        return char not in keep
    return any(low <= code <= high for low, high in _UNSEEN_MARKS)


def label(char: str) -> str:
    """``U+202E RIGHT-TO-LEFT OVERRIDE``: the code point and its Unicode name (or its category's, when unnamed)."""
    name = unicodedata.name(char, "") or _UNNAMED.get(unicodedata.category(char), "UNNAMED")
    return f"U+{ord(char):04X} {name}"


_UNNAMED = {"Cc": "CONTROL", "Cs": "SURROGATE", "Co": "PRIVATE USE", "Cn": "UNASSIGNED"}


def visible(text: str, keep: str = "\t\n") -> str:
    """``text`` with every :func:`unseen` character replaced by a marker a reader sees and can name:
    ``"a\\u202eb"`` -> ``"a<U+202E RIGHT-TO-LEFT OVERRIDE>b"``; ``keep=""`` for one line (tab and newline named
    too). Printable ASCII passes at regex speed."""
    return _UNUSUAL.sub(lambda m: f"<{label(m.group())}>" if unseen(m.group(), keep) else m.group(), text)
