"""Decode a frame a worker sent. The worker is hostile: assume it bypassed the language layer and writes
arbitrary bytes. Whatever this returns is JSON data any JSON or MCP writer accepts, done here, once.

- Strings: a lone UTF-16 surrogate (`chr(0xd800)` in a value, key, output, error or tool name) kills a
  UTF-8 writer, so each becomes U+FFFD. Frames are ASCII JSON, where a surrogate can only be a `\\udXXX`
  escape: one regex pass over the text rewrites the lone ones before `json.loads` sees them.
- Numbers: NaN, Infinity and overflowing floats are not JSON; they become the strings the worker's own
  conversion gives them ("nan", "inf", "-inf").
- Nesting: deeper than any value the worker's conversion produces (sandbox.jsonable.MAX_DEPTH, plus the
  message's own envelope) is refused, so no consumer recurses past its limit.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from sandbox.channel import ProtocolError
from sandbox.jsonable import MAX_DEPTH

__all__ = ["MAX_NESTING", "decode_untrusted"]

MAX_NESTING = MAX_DEPTH + 3
"""Containers nested in one message: a value of MAX_DEPTH + 1 levels inside a call's {"kwargs": {...}}."""

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

_CONSTANTS = {"NaN": "nan", "Infinity": "inf", "-Infinity": "-inf"}
_CONTAINERS = (dict, list)


def decode_untrusted(body: bytes) -> Any:
    """JSON data from a frame body; `ProtocolError` if it is not JSON or nests too deep."""
    text = _replace_lone_surrogates(body.decode("utf-8", "replace"))
    try:
        value = json.loads(text, parse_constant=_CONSTANTS.__getitem__, parse_float=_finite_float)
    except (ValueError, RecursionError) as exc:
        raise ProtocolError(f"malformed message: {str(exc)[:200]}") from None
    if text.count("[") + text.count("{") > MAX_NESTING and not _nesting_within(value, MAX_NESTING):
        raise ProtocolError(f"message nested more than {MAX_NESTING} levels deep")
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


def _finite_float(text: str) -> float | str:
    number = float(text)
    return number if math.isfinite(number) else repr(number)


def _nesting_within(value: Any, limit: int) -> bool:
    """Whether `value` nests at most `limit` containers deep; walked level by level, without recursion."""
    level = [value] if isinstance(value, _CONTAINERS) else []
    for _ in range(limit):
        below: list[Any] = []
        for container in level:
            items = container.values() if type(container) is dict else container
            below += [item for item in items if type(item) in _CONTAINERS]
        if not below:
            return True
        level = below
    return False
