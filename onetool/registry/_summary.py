"""A tool's one-line summary for compact listings: its first sentence, keeping any deprecation or warning.

Models pick tools from these lines, so a "DEPRECATED" or "Warning:" that the full description carries must not be
cut away with the rest: a bare marker line joins the sentence after it, and a later sentence with a marker is
appended to the first one. A text too long for its place is cut where a sentence or a clause ends (a stop, a comma,
a semicolon, a colon, a dash), never in the middle of a phrase ("Create multiple new entities in"): what has no
such end within reach is left out, and ``proxy.describe`` has it whole.
"""

from __future__ import annotations

import re

MAX_SUMMARY_CHARS = 160
_MAX_WARNING_CHARS = 80
_MARKER = re.compile(r"\b(?:DEPRECATED|[Dd]eprecated|WARNING|Warning)\b")
_MARKED = re.compile(r"\[?" + _MARKER.pattern + r"\]?:?")
"""A marker with its brackets or colon, as :func:`brief` moves it to the front."""
_FILLER = re.compile(
    r"^\s*(?:This tool |Tool to |Use this to )?(?:[Rr]eturns?|[Gg]ets?|[Rr]etrieves?)\s+"
    r"|\b(?:[Aa]n?|[Tt]he)\s+(?=[A-Za-z])"
)
"""What a purpose says without: a leading "Returns"/"Gets", and articles."""
_SENTENCE = re.compile(r"(?<=[.!?])\s+|\s*\n\s*(?=[^\sa-z])")
"""A sentence ends at its stop, or at a line break unless the next line goes on in lower case (wrapped text)."""
_CLAUSE_END = re.compile(r"[.!?;:,](?=\s)|\s[-\u2013\u2014]\s")
"""Where a sentence or a clause ends inside a text: its punctuation followed by a space, or a spaced dash."""
_MAX_SCANNED_CHARS = 10_000
"""Of a description; a marker further in is not looked for (the listing is rebuilt on every catalogue change)."""


def summarize(description: str) -> str:
    """``"Gets the weather. Deprecated: use forecast."`` from a description that says more in between."""
    sentences = [" ".join(s.split()) for s in _SENTENCE.split(description[:_MAX_SCANNED_CHARS].strip()) if s]
    if not sentences:
        return ""
    first, rest = sentences[0], sentences[1:]
    if rest and _is_bare_marker(first):
        first, rest = f"{first.rstrip(':')}: {rest[0]}", rest[1:]
    warning = None if _MARKER.search(first) else next((s for s in rest if _MARKER.search(s)), None)
    if warning is None:
        return _at_clause(first, MAX_SUMMARY_CHARS)
    warning = _at_clause(warning, _MAX_WARNING_CHARS)
    return f"{_at_clause(first, MAX_SUMMARY_CHARS - len(warning) - 1)} {warning}".strip()


def brief(summary: str, limit: int) -> str:
    """``summary`` in telegraphic style, at most ``limit`` characters, cut where a sentence or clause ends:
    ``"Returns the sum of two numbers."`` becomes ``"sum of two numbers"``. A marker it carries comes first
    (``DEPRECATED: Read...``), so no cut can drop it. Empty when no clause of it fits."""
    marker = _MARKER.search(summary)
    text = " ".join(_FILLER.sub(" ", _MARKED.sub(" ", summary)).split()).strip(" .:-")
    if marker is None:
        return _at_clause(text, limit).rstrip(".")
    word = marker.group().upper()
    return f"{word}: {_at_clause(text, limit - len(word) - 2).rstrip('.')}".rstrip(": ")


def _at_clause(text: str, limit: int) -> str:
    """``text`` when it fits in ``limit`` characters, else its longest head that ends a sentence or a clause
    (outside any parenthesis), else nothing: a cut is not marked, the text is a hint."""
    if len(text) <= limit:
        return text
    best = ""
    for end in _CLAUSE_END.finditer(text, 0, min(len(text), limit + 2)):
        stop = end.end() if end.group()[0] in ".!?" else end.start()
        head = text[:stop]
        if stop > limit:
            break
        if head.count("(") <= head.count(")"):
            best = head
    return best.rstrip(" ,;:-\u2013\u2014")


def _is_bare_marker(text: str) -> bool:
    """``DEPRECATED``, ``[Deprecated]``, ``Warning:``: a marker with nothing else to say."""
    return bool(_MARKER.search(text)) and not re.sub(r"[\W_]", "", _MARKER.sub("", text))
