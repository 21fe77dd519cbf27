"""Decode a frame a worker sent. The worker is hostile: assume it bypassed the language layer and writes
arbitrary bytes. Whatever this returns is JSON data any JSON or MCP writer accepts, done here, once.

- Strings: a lone UTF-16 surrogate (`chr(0xd800)` in a value, key, output, error or tool name) kills a
  UTF-8 writer, so each becomes U+FFFD. Frames are ASCII JSON, where a surrogate can only be a `\\udXXX`
  escape: one regex pass over the text rewrites the lone ones before the decoder sees them.
- Numbers: NaN, Infinity and overflowing floats are not JSON; they become strings ("NaN", "Infinity",
  "-Infinity"). The worker's own conversion never sends them, so this is the rare path.
- Nesting: the decoder refuses more than MAX_NESTING levels (the worker's conversion produces at most
  sandbox.protocol.caps.MAX_DEPTH, plus the message's envelope), so no consumer recurses past its limit.
- Cost: the decoder is pydantic-core's (Rust): an 8 MB frame takes tens of milliseconds where `json` and a
  walk of the result took most of a second, and nothing here walks the decoded value in Python.
"""

from __future__ import annotations

import re
from typing import Any

from pydantic_core import from_json, to_json

from sandbox.protocol.caps import MAX_DEPTH
from sandbox.protocol.channel import ProtocolError

__all__ = ["MAX_NESTING", "decode_untrusted"]

MAX_NESTING = 201
"""Containers nested in one message: pydantic-core's decoder refuses deeper ones (a test pins it). Every
consumer handles this depth; the worker's own values nest at most MAX_DEPTH + 3 levels in a message."""
assert MAX_NESTING > MAX_DEPTH + 3

_HIGH = r"\\u[dD][89abAB][0-9a-fA-F]{2}"
_LOW = r"\\u[dD][c-fC-F][0-9a-fA-F]{2}"
_SURROGATE = r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}"
# One token of JSON text that is not a lone surrogate escape: a run of plain characters, a two-character
# escape (`\\\\` included, so an escaped backslash never starts an escape), a \u escape of a non-surrogate,
# or a high surrogate escape with its low one.
_SAFE = rf"[^\\]++|\\[^u]|\\u(?!{_SURROGATE[3:]})|{_HIGH}{_LOW}"
_SAFE_THEN_LONE = re.compile(rf"((?:{_SAFE})*+){_SURROGATE}")
_SENTINEL = " \\ud800"
"""Appended so every match ends in a lone surrogate and the matches tile the whole text."""

_OVERFLOW = re.compile(rb"[0-9](?:[eE]\+?0*[1-9][0-9]{2}|[0-9]{308})")
"""A number that may overflow a float: an exponent of 100 or more, or 309 digits. Led by a digit, so the
scan is fast (a fifth of what an alternation of bare patterns costs)."""


def decode_untrusted(body: bytes) -> Any:
    """JSON data from a frame body; `ProtocolError` if it is not JSON or nests too deep."""
    try:
        if b"\\ud" in body or b"\\uD" in body or not body.isascii():
            value = from_json(_replace_lone_surrogates(body.decode("utf-8", "replace")), allow_inf_nan=True)
        else:  # what a worker sends: ASCII without surrogate escapes, decoded as it is
            value = from_json(body, allow_inf_nan=True)
        if b"NaN" in body or b"Infinity" in body or _OVERFLOW.search(body):
            value = from_json(to_json(value, inf_nan_mode="strings"))
    except ValueError as exc:
        raise ProtocolError(f"malformed message: {str(exc)[:200]}") from None
    return value


def _replace_lone_surrogates(text: str) -> str:
    if "\\ud" not in text and "\\uD" not in text:
        return text
    # A Python loop over the matches rather than re.sub: a worker can send a million lone surrogates, and
    # the loop lets other threads (the event loop) take the GIL in between, which one C call would not.
    pieces: list[str] = []
    for match in _SAFE_THEN_LONE.finditer(text + _SENTINEL):
        pieces += (match[1], "\\ufffd")
    # Drop the sentinel's replacement and the space before it.
    return "".join(pieces[:-1])[:-1]
