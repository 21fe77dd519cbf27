"""Upstream and snippet text shown inside OneTool's own text: one line, cut (descriptions, listings); cut with a
note (results: :func:`cut`); a name the model got wrong, with the names it may have meant (:func:`closest`);
with what a terminal or a log reader would act on escaped (logs, the CLI: :func:`escape_unsafe`); with what a
URL's userinfo, query or fragment may carry left out (:func:`public_url`, :func:`public_urls`); or with what a
reviewer cannot see named (quarantine reviews: :func:`visible`); or as a name within MCP's tool-name charset
(:func:`mcp_name`: /mcp/direct's names, metric labels)."""

from __future__ import annotations

import difflib
import hashlib
import re
import unicodedata
from collections.abc import Iterable
from urllib.parse import urlsplit, urlunsplit

__all__ = [
    "SUGGEST_MAX_NAME",
    "closest",
    "cut",
    "escape_unsafe",
    "label",
    "mcp_name",
    "one_line",
    "public_url",
    "public_urls",
    "shown_name",
    "unseen",
    "visible",
]

SUGGEST_MAX_NAME = 64
"""Names compared for a "did you mean": difflib costs time quadratic in the name, and a longer name is no typo
of a tool or server name."""

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


MCP_NAME_MAX = 128
_MCP_NAME = re.compile(r"[A-Za-z0-9_.-]{1,128}")
"""A tool name as the MCP specification asks for it (SEP-986): 1 to 128 ASCII letters, digits, ``_``, ``.``, ``-``."""
_NOT_MCP_NAME = re.compile(r"[^A-Za-z0-9_.-]+")
_NAME_HASH = 8
"""Hex digits of the hash that keeps a renamed name apart from every other: 32 bits."""


def mcp_name(name: str, limit: int = MCP_NAME_MAX) -> str:
    """``name`` itself when it is an MCP tool name (SEP-986) of at most ``limit`` characters; else a stable name
    that is one: each run of other characters as ``_``, cut to fit, then ``_`` and 8 hex digits of a hash of the
    whole name, so the renaming of one name is the same every time and two names that differ get different ones
    (``get weather\x1b`` -> ``get_weather__4e134bae``). Cost linear in ``name``, whatever its length."""
    if len(name) <= limit and _MCP_NAME.fullmatch(name):
        return name
    digest = hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:_NAME_HASH]
    head = _NOT_MCP_NAME.sub("_", name[:limit])[: limit - _NAME_HASH - 1]
    return f"{head}_{digest}"


def closest(name: str, names: Iterable[str]) -> list[str]:
    """Up to three of ``names`` that ``name`` may be a typo of, best first: the one "did you mean" of every face.
    None for a name longer than SUGGEST_MAX_NAME, whose cost would be the caller's to bear."""
    if len(name) > SUGGEST_MAX_NAME:
        return []
    return difflib.get_close_matches(name, [n for n in names if len(n) <= SUGGEST_MAX_NAME], n=3, cutoff=0.5)


def shown_name(name: str) -> str:
    """A name as an error quotes it: cut past SUGGEST_MAX_NAME characters (a snippet may pass megabytes), and every
    character a reader would not see named (:func:`visible`, newline and tab included), so that a name cannot add a
    line of its own to the message a model reads."""
    return visible(name if len(name) <= SUGGEST_MAX_NAME else name[:SUGGEST_MAX_NAME] + "...", keep="")


def cut(text: str, limit: int, what: str = "result", hint: str = "", *, length: int | None = None) -> str:
    """``text`` itself when it fits in ``limit`` characters, else its head and a note saying how much was cut
    and, with ``hint``, how to ask for less: the one cut of every face's results. ``length``: the length of the
    whole text when ``text`` is only its head (cut already, where it was made)."""
    length = len(text) if length is None else length
    if length <= limit:
        return text
    advice = f"; {hint}" if hint else ""
    return text[:limit] + f"\n... [{what} cut: showing {limit:,} of {length:,} characters{advice}]"


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


def public_url(url: str) -> str:
    """The URL without userinfo, query or fragment, which may carry credentials: safe to log."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    netloc = f"{host}:{parts.port}" if parts.port else host
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


_URL = re.compile(r"\b[a-zA-Z][a-zA-Z0-9+.-]{0,31}://[^\s'\"<>`]*[^\s'\"<>`.,;:!?)]")
"""A URL in prose: up to a space or quote, and not the punctuation after it. The scheme is bounded: a text is
often a snippet's (a pack's error), and an unbounded one made ``a-a-a-...`` cost time quadratic in its length."""


def public_urls(text: str) -> str:
    """``text`` with every URL in it as :func:`public_url` shows it: a library's message or an exception's text
    (an HTTP error names the URL it failed on) may quote one whose userinfo or query holds a key."""
    return _URL.sub(_public, text)


def _public(match: re.Match[str]) -> str:
    try:
        return public_url(match.group())
    except ValueError:  # not a URL urlsplit reads (a port that is no number, a broken IPv6 host): only its scheme
        return match.group().split("://", 1)[0] + "://..."
