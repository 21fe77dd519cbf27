"""Where OneTool keeps per-user state: the state folder (the SQLite store) and the runtime folder (discovery).

Both are private to the user (mode 0700 when OneTool creates them), because the store may hold values the
user added explicitly (env, headers) and the discovery file holds the admin token.
"""

from __future__ import annotations

import os
import tempfile
from contextlib import suppress
from pathlib import Path

__all__ = [
    "DATABASE_FILENAME",
    "ENV_RUNTIME_DIR",
    "ENV_STATE_DIR",
    "default_database",
    "private_dir",
    "runtime_dir",
    "state_dir",
    "write_private",
]

ENV_STATE_DIR = "ONETOOL_STATE_DIR"
ENV_RUNTIME_DIR = "ONETOOL_RUNTIME_DIR"
DATABASE_FILENAME = "onetool.db"


def state_dir() -> Path:
    """``$ONETOOL_STATE_DIR``, else ``$XDG_STATE_HOME/onetool``, else ``~/.local/state/onetool``."""
    if explicit := os.environ.get(ENV_STATE_DIR):
        return Path(explicit)
    if xdg := os.environ.get("XDG_STATE_HOME"):
        return Path(xdg) / "onetool"
    return Path.home() / ".local" / "state" / "onetool"


def runtime_dir() -> Path:
    """``$ONETOOL_RUNTIME_DIR``, else ``$XDG_RUNTIME_DIR/onetool``, else the state folder's ``run/``."""
    if explicit := os.environ.get(ENV_RUNTIME_DIR):
        return Path(explicit)
    if xdg := os.environ.get("XDG_RUNTIME_DIR"):
        return Path(xdg) / "onetool"
    return state_dir() / "run"


def default_database() -> Path:
    return state_dir() / DATABASE_FILENAME


def private_dir(path: Path) -> Path:
    """Create ``path`` (and missing parents) with mode 0700; an existing folder keeps the mode its owner gave it."""
    # Not mkdir(parents=True): it makes the parents with the default mode (0755), so the runtime folder made on the
    # way to one of its subfolders would be readable by others. The umask can only remove bits from 0700.
    for folder in reversed([path, *path.parents]):
        if not folder.is_dir():
            folder.mkdir(mode=0o700, exist_ok=True)
    return path


def write_private(path: Path, text: str) -> None:
    """Replace ``path`` with ``text`` at once, in a private folder: the file is created 0600 (mkstemp opens with
    O_CREAT | O_EXCL), so it is never readable by others, not even briefly, nor ever half written."""
    fd, temp = tempfile.mkstemp(dir=private_dir(path.parent), prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(temp, path)
    except BaseException:
        with suppress(OSError):
            os.unlink(temp)
        raise
