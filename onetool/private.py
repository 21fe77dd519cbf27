"""Folders only their owner may enter: where OneTool keeps what holds tokens, env values or upstream text (the state
store, the discovery files, the log file)."""

from __future__ import annotations

from pathlib import Path

__all__ = ["private_dir"]


def private_dir(path: Path) -> Path:
    """Create ``path`` (and missing parents) with mode 0700; an existing folder keeps the mode its owner gave it."""
    # Not mkdir(parents=True): it makes the parents with the default mode (0755), so the runtime folder made on the
    # way to one of its subfolders would be readable by others. The umask can only remove bits from 0700.
    for folder in reversed([path, *path.parents]):
        if not folder.is_dir():
            folder.mkdir(mode=0o700, exist_ok=True)
    return path
