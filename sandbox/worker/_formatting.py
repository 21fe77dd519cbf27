"""`str.format` for snippets: format fields (`{0.attr}`, `{0[key]}`) read attributes through the guard.

The real `str.format` and `format_map` read any attribute a field names, with no guard. A snippet gets
these instead, however it reaches the real ones: bound to a str or str subclass (`''.format`,
`super(S, s).format`) or the unbound descriptor (`str.format`, `type('').format_map`).
"""

from __future__ import annotations

import string
from collections.abc import Callable, Iterable, Mapping
from types import BuiltinMethodType
from typing import Any

__all__ = ["SafeFormats"]

_FieldSplit = Callable[[str], tuple[Any, Iterable[tuple[bool, Any]]]]
_field_name_split: _FieldSplit = __import__("_string").formatter_field_name_split


class _SafeFormatter(string.Formatter):
    def __init__(self, getattr_: Callable[[Any, str], Any]) -> None:
        self._getattr = getattr_

    def get_field(self, field_name: str, args: Any, kwargs: Any) -> tuple[Any, Any]:
        first, rest = _field_name_split(field_name)
        obj = self.get_value(first, args, kwargs)
        for is_attribute, key in rest:
            obj = self._getattr(obj, key) if is_attribute else obj[key]
        return obj, first


class SafeFormats:
    """Stand-ins for the real format methods, whose fields go through ``getattr_`` (the guard)."""

    def __init__(self, getattr_: Callable[[Any, str], Any]) -> None:
        formatter = _SafeFormatter(getattr_)

        def bound_format(template: str) -> Callable[..., str]:
            def format(*args: Any, **kwargs: Any) -> str:
                return formatter.vformat(template, args, kwargs)

            return format

        def bound_format_map(template: str) -> Callable[[Mapping[str, Any]], str]:
            def format_map(mapping: Mapping[str, Any]) -> str:
                return formatter.vformat(template, (), mapping)

            return format_map

        def unbound_format(template: str, /, *args: Any, **kwargs: Any) -> str:
            return formatter.vformat(template, args, kwargs)

        def unbound_format_map(template: str, mapping: Mapping[str, Any], /) -> str:
            return formatter.vformat(template, (), mapping)

        self._bound = {"format": bound_format, "format_map": bound_format_map}
        self._unbound: dict[Any, Callable[..., str]] = {str.format: unbound_format, str.format_map: unbound_format_map}

    def defuse(self, value: Any) -> Any:
        """``value``, or our stand-in when it is a real format method, however it was reached."""
        if type(value) is BuiltinMethodType:
            # Bound to a str (or str subclass) instance: ''.format, S('').format, super(S, s).format.
            if value.__name__ in self._bound and isinstance(value.__self__, str):
                return self._bound[value.__name__](value.__self__)
        elif type(value) is type(str.format):
            # The method descriptor, from str, type(''), a str subclass or super(S, S).
            return self._unbound.get(value, value)
        return value
