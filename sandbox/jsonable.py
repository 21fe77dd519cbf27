"""Make any snippet value JSON data: the only kind of data that leaves the worker."""

from __future__ import annotations

import contextlib
import math
from typing import Any

MAX_DEPTH = 100


class TooDeep(Exception):
    """The value nests deeper than MAX_DEPTH (or contains itself)."""


def to_json(value: Any, depth: int = 0) -> Any:
    """Tuples and sets become lists (sets sorted when their items allow), dict keys become str,
    non-finite floats and any other object become their repr()."""
    if depth > MAX_DEPTH:
        raise TooDeep(f"the value is nested more than {MAX_DEPTH} levels deep (or contains itself)")
    if value is None or value is True or value is False:
        return value
    if isinstance(value, str):
        return str(value)
    if isinstance(value, int):
        # Python refuses str() of ints past 4300 digits; json.dumps would fail on them the same way.
        return int(value) if value.bit_length() < 14000 else f"<int of {value.bit_length()} bits>"
    if isinstance(value, float):
        return float(value) if math.isfinite(value) else repr(float(value))
    if isinstance(value, dict):
        return {_key(k): to_json(v, depth + 1) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [to_json(item, depth + 1) for item in value]
    if isinstance(value, set | frozenset):
        items = list(value)
        with contextlib.suppress(TypeError):  # mixed types stay in iteration order
            items.sort()
        return [to_json(item, depth + 1) for item in items]
    return safe_repr(value)


def _key(key: Any) -> str:
    return key if isinstance(key, str) else safe_repr(key) if not isinstance(key, int | float) else str(key)


def safe_repr(value: Any) -> str:
    try:
        return repr(value)
    except Exception:
        return f"<{type(value).__name__} object>"
