"""Where OneTool keeps per-user state: the state folder (the SQLite stores) and the runtime folder (discovery).

Both are private to the user (mode 0700 when OneTool creates them), because the store may hold values the
user added explicitly (env, headers) and the discovery file holds the admin token.

Each config file is a project of its own: its store is ``projects/<key>/onetool.db`` in the state folder, and its
gateway's discovery file and upstream records are under its key in the runtime folder, so servers added or
disabled while working on one project never reach another's gateway. The key (:func:`project_key`) names the
config's folder and hashes its absolute path.
"""

from __future__ import annotations

import hashlib
import os
import re
import tempfile
from contextlib import suppress
from pathlib import Path

from onetool.private import private_dir

__all__ = [
    "DATABASE_FILENAME",
    "DEFAULT_FILENAME",
    "ENV_CONFIG",
    "ENV_RUNTIME_DIR",
    "ENV_STATE_DIR",
    "LEGACY_DATABASE",
    "default_database",
    "find_config",
    "legacy_notice",
    "project_database",
    "project_key",
    "runtime_dir",
    "state_dir",
    "write_private",
]

DEFAULT_FILENAME = "onetool.yaml"
ENV_CONFIG = "ONETOOL_CONFIG"
ENV_STATE_DIR = "ONETOOL_STATE_DIR"
ENV_RUNTIME_DIR = "ONETOOL_RUNTIME_DIR"
DATABASE_FILENAME = "onetool.db"


def find_config(explicit: str | os.PathLike[str] | None = None) -> Path | None:
    """The config file a command uses: ``--config``, else ``$ONETOOL_CONFIG``, else ``./onetool.yaml`` if it
    exists, else None. Here, not with the config models, because the CLI's fast path (attaching to the gateway of
    this config) must not import them."""
    if explicit:
        return Path(explicit)
    if env := os.environ.get(ENV_CONFIG):
        return Path(env)
    default = Path(DEFAULT_FILENAME)
    return default if default.is_file() else None


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
    """The store of a gateway with no config file."""
    return project_database(None)


LEGACY_DATABASE = DATABASE_FILENAME
"""The store every project shared before each had its own: ``onetool.db`` in the state folder itself."""


def legacy_notice(database: Path) -> str | None:
    """What to tell the user when a project's store is new while the store every project once shared exists."""
    legacy = state_dir() / LEGACY_DATABASE
    if database.exists() or not legacy.is_file():
        return None
    return (
        f"{legacy} holds the state every project shared before each config file had its own; this config's is "
        f"{database}, new: to keep the servers added there, stop this gateway and copy it over (cp {legacy} {database})"
    )


def project_key(config: Path | None) -> str:
    """The name of a config file's project: its folder's name (for people) and 12 hex digits of the hash of its
    absolute path (two projects whose folders share a name stay apart); ``default`` without a config file."""
    if config is None:
        return "default"
    resolved = config.resolve()
    readable = re.sub(r"[^A-Za-z0-9_.-]+", "_", resolved.parent.name)[:40] or "root"
    return f"{readable}-{hashlib.sha256(str(resolved).encode()).hexdigest()[:12]}"


def project_database(config: Path | None, folder: Path | None = None) -> Path:
    """The SQLite store of the project of ``config``: in ``folder`` if given (``state.dir``), else in the project's
    own folder under the state folder."""
    return (folder or state_dir() / "projects" / project_key(config)) / DATABASE_FILENAME


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
