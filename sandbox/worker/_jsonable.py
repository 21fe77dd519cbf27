"""Make any snippet value JSON data: the only kind of data that leaves the worker.

The value may be built from the snippet's subclasses of str, int, float, dict, list, set, whose methods
(`__str__`, `__float__`, `items`, `__iter__`, `__lt__`, `bit_length`, ...) are the snippet's code and may
answer differently each time they are asked. So the data is read through the base types' own slots
(`float.__float__(x)` copies the stored double once, `dict.items(x)` walks the real table) and sets are
ordered by their converted JSON values; the only snippet code that runs here is `__repr__` of objects that
are not data, and whatever it does ends as a string or as the snippet's error.
"""

from __future__ import annotations

import math
from typing import Any

from sandbox.protocol.caps import MAX_DEPTH

__all__ = ["TooDeep", "safe_repr", "text_of", "to_json"]

_INT_BITS = 14000
"""Python refuses str() of ints past 4300 digits; json.dumps would fail on them the same way."""


class TooDeep(Exception):
    """The value nests deeper than MAX_DEPTH (or contains itself)."""


def to_json(value: Any, depth: int = 0) -> Any:
    """Tuples and sets become lists (sets sorted), dict keys become str, non-finite floats and any other
    object become their repr()."""
    if depth > MAX_DEPTH:
        raise TooDeep(f"the value is nested more than {MAX_DEPTH} levels deep (or contains itself)")
    if value is None or value is True or value is False:
        return value
    if isinstance(value, str):
        return str.__str__(value)
    if isinstance(value, int):
        return _int(value)
    if isinstance(value, float):
        return _float(value)
    if isinstance(value, dict):
        return {_key(k): to_json(v, depth + 1) for k, v in dict.items(value)}
    if isinstance(value, list):
        return [to_json(item, depth + 1) for item in list.__iter__(value)]
    if isinstance(value, tuple):
        return [to_json(item, depth + 1) for item in tuple.__iter__(value)]
    if isinstance(value, set | frozenset):
        items = set.__iter__(value) if isinstance(value, set) else frozenset.__iter__(value)
        return sorted((to_json(item, depth + 1) for item in items), key=_order)
    return safe_repr(value)


def _int(value: int) -> int | str:
    number = int.__int__(value)  # an exact int: bool and int subclasses alike
    bits = number.bit_length()
    return number if bits < _INT_BITS else f"<int of {bits} bits>"


def _float(value: float) -> float | str:
    number = float.__float__(value)  # read once: a subclass cannot answer isfinite() one way and json another
    return number if math.isfinite(number) else repr(number)


def _order(item: Any) -> tuple[int, Any]:
    """A total order on converted values: numbers, then strings, then the rest by their repr."""
    if isinstance(item, int | float) and not isinstance(item, bool):
        return (0, item)
    if isinstance(item, str):
        return (1, item)
    return (2, repr(item))


def _key(key: Any) -> str:
    if key is None or key is True or key is False:
        return str(key)
    if isinstance(key, str):
        return str.__str__(key)
    if isinstance(key, int):
        return str(_int(key))
    if isinstance(key, float):
        return str(_float(key))
    return safe_repr(key)


def text_of(value: Any) -> str:
    """An exact str with the same characters: str subclasses carry the snippet's methods."""
    return str.__str__(value)


def safe_repr(value: Any) -> str:
    """repr() of a snippet object, whatever its __repr__ does (raise SystemExit, recurse, return a subclass)."""
    try:
        return str.__str__(repr(value))
    except BaseException:
        return f"<{type(value).__name__} object>"
