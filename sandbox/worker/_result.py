"""A large result, cut in the worker: the host then reads a head of `max_output` characters, not the whole value.

The host shows a run's value as compact JSON cut at `sandbox.max_output` characters. Sent whole, a value of two
million empty dicts is a 6 MB frame the host decodes into 150 MB of objects (most of a second of its event loop)
only to show its first 40,000 characters. Here, in the worker, under the run's own limits, such a value becomes
that text and its full length. A value with media within the host's search (sandbox/protocol/shaping.py) is sent
whole: the host may have to pass them on as MCP content.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from sandbox.protocol.shaping import MEDIA_DEPTH, MEDIA_TYPES, MEDIA_WALK, MIN_SHOWN

__all__ = ["text_head"]

_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))


def text_head(value: Any, max_output: int) -> tuple[str, int] | None:
    """(the head of the value's text the host may show, the text's length) when the host would cut it and has no
    media to look for in it; None to send the value itself. `value` is JSON data (_jsonable.to_json)."""
    if value is None or isinstance(value, bool | int | float) or _has_media(value):
        return None
    text = value if isinstance(value, str) else _ENCODER.encode(value)
    shown = max(max_output, MIN_SHOWN)
    if len(text) <= shown:
        return None
    return text[:shown], len(text)


def _has_media(value: Any) -> bool:
    """Whether the host's search (onetool.registry.results) may meet a dict that names a media type: the same values, in
    the same order, within the same budget."""
    visits = MEDIA_WALK

    def found(item: Any, depth: int) -> bool:
        nonlocal visits
        visits -= 1
        if depth > MEDIA_DEPTH or visits < 0:
            return False
        children: Iterable[Any]
        if isinstance(item, dict):
            if item.get("type") in MEDIA_TYPES:
                return True
            children = item.values()
        elif isinstance(item, list):
            children = item
        else:
            return False
        for child in children:
            if visits < 0:
                return False
            if found(child, depth + 1):
                return True
        return False

    return found(value, 0)
