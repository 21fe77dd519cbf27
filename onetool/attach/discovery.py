"""The discovery files: how the CLI finds the gateway serving a config, and its admin token.

``onetool serve --http`` writes ``gateways/<project key>.json`` in the user's runtime folder
(``onetool.state.paths``: one project per config file): URL, pid, admin token, config file, start time and
version, as JSON, mode 0600 in a 0700 folder, written atomically (a private temp file, then ``os.replace``), and
removed on exit. :func:`running` lists every live one (``onetool status``).

Who owns a file: the first live gateway of the config keeps it. ``write`` leaves a file whose pid is alive and not ours
alone (a gateway still serves there and the CLI should keep finding it) and returns None: the caller logs that
this gateway is reachable by its URL only. A stale file (its pid is dead) or a malformed one is replaced.
``read`` never raises: an absent, stale, unreadable or malformed file is None.

Limit: after a crash, a pid reused by an unrelated process makes the stale file look live until that process
ends; a CLI that gets "connection refused" from the URL should treat it as "no gateway running".
"""

from __future__ import annotations

import json
import os
import secrets
from contextlib import suppress
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from onetool import __version__
from onetool.state.paths import project_key, runtime_dir, write_private

__all__ = ["FOLDER", "MAX_BYTES", "Discovery", "discovery_file", "generate_token", "read", "remove", "running", "write"]

FOLDER = "gateways"
MAX_BYTES = 64 * 1024  # a real file is about 200 bytes; anything far larger is not ours


@dataclass(frozen=True)
class Discovery:
    url: str
    pid: int
    admin_token: str = field(repr=False)
    started_at: datetime
    version: str
    config: str | None = None
    """The config file it serves (absolute), None when it runs without one."""
    file: Path | None = field(default=None, compare=False)
    """The discovery file this record was read from (it holds the admin token)."""


def discovery_file(config: Path | None) -> Path:
    """Where the gateway serving ``config`` (None: no config file) is published."""
    return runtime_dir() / FOLDER / f"{project_key(config)}.json"


def running() -> list[Discovery]:
    """Every live gateway of this user, oldest first."""
    try:
        files = sorted((runtime_dir() / FOLDER).glob("*.json"))
    except OSError:
        return []
    found = [record for file in files if (record := read(file)) is not None]
    return sorted(found, key=lambda record: record.started_at)


def generate_token() -> str:
    """A fresh admin token (256 bits, hex): never starting with ``-``, so ``--token VALUE`` parses in every shell."""
    return secrets.token_hex(32)


def write(url: str, admin_token: str, config: Path | None) -> Path | None:
    """Publish this process's gateway of ``config``; None (nothing written) when another live gateway of the same
    config owns its file.

    Raises OSError when the runtime folder or the file cannot be written.
    """
    path = discovery_file(config)
    current = read(path)
    if current is not None and current.pid != os.getpid():
        return None
    record = {
        "url": url,
        "pid": os.getpid(),
        "admin_token": admin_token,
        "config": str(config.resolve()) if config else None,
        "started_at": datetime.now(UTC).isoformat(),
        "version": __version__,
    }
    write_private(path, json.dumps(record))  # it holds the admin token
    return path


def read(path: Path) -> Discovery | None:
    """The live gateway's record in ``path``, or None when the file is absent, stale (pid dead), unreadable or
    malformed."""
    found = _load(path)
    return found if found is not None and _alive(found.pid) else None


def remove(path: Path, expected_pid: int | None = None) -> bool:
    """Remove the file if it belongs to ``expected_pid`` (default: this process); True if it was removed."""
    found = _load(path)
    if found is None or found.pid != (os.getpid() if expected_pid is None else expected_pid):
        return False
    with suppress(FileNotFoundError):
        path.unlink()
    return True


def _load(path: Path) -> Discovery | None:
    """The file's record, alive or not; None when it is absent, unreadable or malformed."""
    try:
        with path.open("rb") as f:
            return _parse(json.loads(f.read(MAX_BYTES)), path)
    except (OSError, ValueError, TypeError, KeyError):
        return None


def _parse(data: Any, file: Path) -> Discovery:
    """A Discovery from the file's JSON; ValueError, TypeError or KeyError for anything else."""
    if not isinstance(data, dict):
        raise TypeError("not a JSON object")
    url, pid, token, started, version = (
        data["url"],
        data["pid"],
        data["admin_token"],
        data["started_at"],
        data["version"],
    )
    config = data.get("config")
    if not all(isinstance(v, str) for v in (url, token, started, version)) or not isinstance(config, str | None):
        raise TypeError("a field is not a string")
    # a pid of 0 or below would make os.kill address a whole process group
    if type(pid) is not int or pid <= 0:
        raise ValueError("pid is not a positive integer")
    started_at = datetime.fromisoformat(started)
    return Discovery(url, pid, token, started_at, version, config, file)


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, OverflowError):
        return False
    except PermissionError:
        return True  # it exists, owned by another user
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True  # no /proc (macOS): signal 0 is all we can know
    return stat.rsplit(")", 1)[1].split()[0] != "Z"  # a zombie has exited; its parent just has not reaped it
