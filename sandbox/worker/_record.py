"""A JSON object as a pack call hands it to the snippet: a dict whose keys also read as attributes.

Specs and models write `sites[0].name` as often as `sites[0]["name"]`. A :class:`Record` is a plain dict in
every other way (`isinstance(r, dict)`, JSON-serialisable, item access, every dict method), so nothing that
takes data needs to know it. Attribute reads are read-only and only reach keys: a key that is not an
identifier, starts with "_" (the language layer refuses those names), or clashes with a dict method (`items`,
`keys`, `get`, ...) stays item-only, because the method is found first.
"""

from __future__ import annotations

from typing import Any

__all__ = ["Record"]

_SHOWN_KEYS = 20


class Record(dict[str, Any]):
    __slots__ = ()

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError:
            keys = [key for key in self if isinstance(key, str)]
            shown = ", ".join(keys[:_SHOWN_KEYS]) + (", ..." if len(keys) > _SHOWN_KEYS else "")
            raise AttributeError(
                f"this object has no key {name!r} (its keys: {shown or 'none'}); a key that is not an identifier or "
                "is named like a dict method reads only as obj['key']"
            ) from None
