"""Hot reload: what re-reading the config file changed, what only a restart applies, and the file watch.

A reload (SIGHUP, ``onetool reload``, ``POST /admin/reload``, or ``watch: true``) reads the file and validates it
whole before anything changes: a bad file changes nothing and says why. Then the gateway applies the difference
(:meth:`onetool.core.gateway.Gateway.reload`): servers added start, removed ones stop, changed ones restart, and the
untouched keep their connections, so clients keep their sessions; local packs are imported again; the sandbox's
per-run limits apply to the next run. What is bound at start (the listening socket, the state store, the pool's
sizes, the faces' options) is listed in :attr:`Reloaded.restart_needed` instead of being half applied.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import anyio

from onetool.config import Config
from onetool.logs import logger

__all__ = ["LIVE_SANDBOX_KEYS", "Reloaded", "restart_needed", "watch_files"]

LIVE_SANDBOX_KEYS = frozenset(
    {"timeout", "cpu_seconds", "memory_mb", "max_calls", "max_output", "max_message", "max_recursion"}
)
"""``sandbox:`` keys a run reads when it starts; the others size the worker pool, made once."""
_LIVE = frozenset({"servers", "packs", "watch"})
"""Top-level keys a reload applies whole."""
_LIVE_PARTS = {"sandbox": LIVE_SANDBOX_KEYS, "ui": frozenset({"show_code"})}
"""Keys of a section a reload applies; the section's others wait for a restart."""
WATCH_PERIOD = 1.0
"""Seconds between two looks at the watched files (a stat each: no dependency, and it sees atomic replaces)."""
SETTLE = 0.3
"""Seconds a changed file must stay unchanged before it is read: an editor's save can take several writes."""


@dataclass(frozen=True)
class Reloaded:
    """What a reload did: servers by what happened to them, and the changed keys that wait for a restart."""

    added: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    restarted: list[str] = field(default_factory=list)
    """Their connection changed (command, URL, env, timeouts...): reconnected with the new entry."""
    updated: list[str] = field(default_factory=list)
    """Changed without a reconnect: tools filter, quarantine."""
    packs: list[str] = field(default_factory=list)
    """The local packs, imported again."""
    restart_needed: list[str] = field(default_factory=list)
    """Changed keys this gateway keeps as they were until it restarts (``http.token``...)."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def summary(self) -> str:
        parts = [f"{what}: {', '.join(names)}" for what, names in self._servers() if names]
        said = "; ".join(parts) or "no server changed"
        if self.restart_needed:
            said += f"; takes effect at restart: {', '.join(self.restart_needed)}"
        return said

    def _servers(self) -> Iterator[tuple[str, list[str]]]:
        yield from (("added", self.added), ("removed", self.removed), ("restarted", self.restarted))
        yield "updated", self.updated


def restart_needed(old: Config, new: Config) -> list[str]:
    """The dotted keys whose change a running gateway does not apply (``http.token``, ``sandbox.max_workers``)."""
    before, after = old.model_dump(mode="json"), new.model_dump(mode="json")
    keys: list[str] = []
    for key in sorted(before.keys() | after.keys()):
        if key in _LIVE or before.get(key) == after.get(key):
            continue
        if key in _LIVE_PARTS:
            keys += [f"{key}.{k}" for k in _changed(before[key], after[key]) if k not in _LIVE_PARTS[key]]
        else:
            keys += [f"{key}.{k}" for k in _changed(before.get(key), after.get(key))] or [key]
    return keys


def _changed(before: Any, after: Any) -> list[str]:
    if not isinstance(before, Mapping) or not isinstance(after, Mapping):
        return []
    return sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))


def watched(config: Config) -> list[Path]:
    """The files a watch looks at: the config file and every local pack's file."""
    files = [config.path] if config.path is not None else []
    for folder in config.packs.dirs:
        files += sorted(folder.glob("*.py")) if folder.is_dir() else []
    return files


async def watch_files(files: Callable[[], Iterable[Path]], changed: Callable[[], Awaitable[Any]]) -> None:
    """Until cancelled: ``await changed()`` once the files ``files()`` names (asked again after each change, so a
    new pack file is watched too) changed and then stayed unchanged for SETTLE seconds."""
    seen = _stamps(files())
    while True:
        await anyio.sleep(WATCH_PERIOD)
        now = _stamps(files())
        if now == seen:
            continue
        while True:  # wait for the writes to end
            await anyio.sleep(SETTLE)
            settled = _stamps(files())
            if settled == now:
                break
            now = settled
        logger.info("the config or a local pack changed on disk: reloading")
        # What was read is at least as new as ``now``: a save during the reload is seen at the next look.
        seen = now
        await changed()


def _stamps(files: Iterable[Path]) -> dict[Path, tuple[int, int, int] | None]:
    """Each file's identity and change time; None for one that is gone (a save may delete, then write)."""
    stamps: dict[Path, tuple[int, int, int] | None] = {}
    for path in files:
        try:
            st = os.stat(path)
        except OSError:
            stamps[path] = None
            continue
        stamps[path] = (st.st_ino, st.st_size, st.st_mtime_ns)
    return stamps
