"""A listing of many parts (``run``'s packs, ``inspect``'s servers) fitted into a tool description's byte budget.

A tool's description is sent to the model on every turn, so it has a budget in bytes as the client receives it
(:func:`json_size`). Every part is listed in full while everything fits. When it does not, the listing gives up
detail in steps (:class:`Levels`), each taken by every part (longest listing first) before any part takes the next:
the compact form, then purposes cut shorter for all, then no purposes, then names only, then a count with what the
part is about (:func:`gist`), then a count; past that, as many parts as fit and a line for the rest. Names go last:
with them a model can write the call, and ask for the rest.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Generic, TypeVar

__all__ = ["MAX_PURPOSE_CHARS", "MIN_PURPOSE_CHARS", "Levels", "fit", "gist", "json_size"]

MAX_PURPOSE_CHARS = 80
"""A tool's purpose in the compact form, at most; cut shorter for all tools when the listing does not fit."""
MIN_PURPOSE_CHARS = 32
"""Cut shorter, a purpose mostly repeats the tool's name: parts drop their purposes instead, longest first."""
_GIST_WORDS = 5
"""Words a part's line names what it is about by, at most (the count level)."""
_GENERIC_WORDS = "get list create update delete set add remove search find read write run fetch new retrieve api"
_GENERIC = frozenset(_GENERIC_WORDS.split())
"""Words of tool names that say what is done, not what to: left out of a gist."""
_NAME_WORDS = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|\d+")
"""The words of a tool's name: ``get_pull_request``, ``get-pull-request`` and ``getPullRequest`` alike."""

T = TypeVar("T")
Level = Callable[[T], str]


@dataclass(frozen=True)
class Levels(Generic[T]):
    """How one kind of part is listed at each level of detail, most first."""

    full: Level[T]
    compact: Callable[[int], Level[T]]
    """One line a tool with its purpose cut to so many characters (0: none)."""
    names: Level[T]
    gist: Level[T]
    count: Level[T]
    rest: Callable[[int], str]
    """The line that stands for so many parts left out."""


def json_size(text: str) -> int:
    """Bytes of ``text`` inside a JSON string, as a client receives it: escapes and UTF-8 counted."""
    return len(json.dumps(text, ensure_ascii=False).encode()) - 2


def fit(parts: Mapping[str, T], levels: Levels[T], room: int) -> tuple[list[str], bool]:
    """Each part's lines, joined by newlines, within ``room`` bytes; and whether any part is shown with less than
    everything."""
    return _Listing(parts, levels).fit(room)


def gist(names: Iterable[str], own: str) -> list[str]:
    """The words most of ``names`` (a part's tool names) are made of, most used first, less those that say what is
    done (``get``, ``list``) and those of the part's ``own`` name: what the part is about, in a few words."""
    seen: dict[str, int] = {}
    for name in names:
        for word in dict.fromkeys(w.lower() for w in _NAME_WORDS.findall(name)):
            if len(word) > 1 and word not in _GENERIC and word not in own and not word.isdigit():
                seen[word] = seen.get(word, 0) + 1
    return sorted(seen, key=lambda w: -seen[w])[:_GIST_WORDS]


class _Listing(Generic[T]):
    """Every part's listing at the level of detail chosen for it, and the bytes they take together (kept as parts
    change level: a description is rebuilt on the event loop after every catalogue change)."""

    def __init__(self, parts: Mapping[str, T], levels: Levels[T]) -> None:
        self._parts = parts
        self._levels = levels
        self.chosen: dict[str, str] = {}
        self._sizes: dict[str, int] = {}
        self._size = 0
        self._take_all(levels.full)

    def fit(self, room: int) -> tuple[list[str], bool]:
        if self._size <= room:
            return list(self.chosen.values()), False
        compact = self._levels.compact
        if self._degrade(compact(MAX_PURPOSE_CHARS), room):
            return list(self.chosen.values()), True
        # Every part is compact and still too long: the longest purposes that fit every part, if they say enough;
        # else purposes for the parts with the shortest listings only.
        low, high = MIN_PURPOSE_CHARS, MAX_PURPOSE_CHARS - 1
        while low < high:
            middle = (low + high + 1) // 2
            low, high = (middle, high) if self._all_at(compact(middle)) <= room else (low, middle - 1)
        self._take_all(compact(low))
        for level in (compact(0), self._levels.names, self._levels.gist, self._levels.count):
            if self._degrade(level, room):
                return list(self.chosen.values()), True
        return self._first_fitting(room), True

    def _take(self, name: str, text: str) -> None:
        size = json_size(text) + 2  # + the "\n" that joins it
        self._size += size - self._sizes.get(name, 0)
        self.chosen[name], self._sizes[name] = text, size

    def _take_all(self, level: Level[T]) -> None:
        for name, part in self._parts.items():
            self._take(name, level(part))

    def _degrade(self, level: Level[T], room: int) -> bool:
        """Take ``level`` part by part, longest listing first, until everything fits; whether it does."""
        for name in sorted(self._sizes, key=self._sizes.__getitem__, reverse=True):
            if self._size <= room:
                return True
            self._take(name, level(self._parts[name]))
        return self._size <= room

    def _all_at(self, level: Level[T]) -> int:
        return sum(json_size(level(part)) + 2 for part in self._parts.values())

    def _first_fitting(self, room: int) -> list[str]:
        """As many parts' lines as fit, and the line for those left out (only for hundreds of parts)."""
        lines = list(self.chosen.values())
        kept: list[str] = []
        used = 0
        for i, line in enumerate(lines):
            rest = self._levels.rest(len(lines) - i)
            if used + json_size(line) + json_size(rest) + 4 > room:
                return [*kept, rest]
            kept.append(line)
            used += json_size(line) + 2
        return kept
