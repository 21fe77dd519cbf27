"""Upstream text shown inside OneTool's own text (descriptions, listings): one line, cut."""

from __future__ import annotations

import re

_SPACE = re.compile(r"\s+")


def one_line(text: str, limit: int) -> str:
    """``text`` with its whitespace collapsed, so no upstream string starts a line of its own, cut at ``limit``
    characters with ``...``. Only the head of a huge text is looked at."""
    line = _SPACE.sub(" ", text[: limit * 4 + 16]).strip()
    return line if len(line) <= limit else line[:limit] + "..."
