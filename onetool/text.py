"""Upstream and snippet text shown inside OneTool's own text: one line, cut (descriptions, listings), or with
what a terminal or a log reader would act on escaped (logs, the CLI)."""

from __future__ import annotations

import re

_SPACE = re.compile(r"\s+")
_INVISIBLE = (
    "\x7f-\x9f"  # DEL, C1 (CSI, OSC, ...)
    "\u061c\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff"  # bidi controls, zero-width, line/paragraph separators
    "\U000e0000-\U000e007f"  # tag characters
    "\ud800-\udfff"  # lone surrogates: no UTF-8 writer takes them
)
_UNSAFE = re.compile(f"[\x00-\x1f{_INVISIBLE}]")
_UNSAFE_BUT_LINES = re.compile(f"[\x00-\x08\x0b-\x1f{_INVISIBLE}]")


def escape_unsafe(text: str, *, keep_lines: bool = False) -> str:
    """``text`` with every control (C0, DEL, C1), bidi, zero-width, line-separator and tag character, and every
    lone surrogate, as a visible Python escape (``\\x1b``, ``\\u202e``, ``\\U000e0041``): a terminal acts on none
    of them (OSC 52 writes the clipboard) and a reader sees them all. ``keep_lines`` keeps newline and tab."""
    return (_UNSAFE_BUT_LINES if keep_lines else _UNSAFE).sub(_escape, text)


def _escape(match: re.Match[str]) -> str:
    return match.group().encode("unicode_escape", "backslashreplace").decode("ascii")


def one_line(text: str, limit: int) -> str:
    """``text`` with its whitespace collapsed, so no upstream string starts a line of its own, cut at ``limit``
    characters with ``...``. Only the head of a huge text is looked at."""
    line = _SPACE.sub(" ", text[: limit * 4 + 16]).strip()
    return line if len(line) <= limit else line[:limit] + "..."
