"""A real, local PostgreSQL for tests: initdb into a temp folder, listening on 127.0.0.1 only, trust auth.

PostgreSQL refuses to run as root; as root (CI) it runs as the `postgres` user (`.ci/run` makes sure there is
one), else `nobody`. Without PostgreSQL's binaries (initdb, pg_ctl) the tests that need it are skipped.
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.conftest import free_port, wait_for_port

__all__ = ["PG_USER", "create_database", "pg_bin", "scratch_postgres"]

PG_USER = "onetool"


def pg_bin(name: str) -> str | None:
    found = shutil.which(name)
    if found:
        return found
    candidates = sorted(Path("/usr/lib/postgresql").glob(f"*/bin/{name}"))
    return str(candidates[-1]) if candidates else None


def _owner() -> str:
    try:
        pwd.getpwnam("postgres")
    except KeyError:
        return "nobody"
    return "postgres"


def _as_pg_owner(args: list[str]) -> list[str]:
    # PostgreSQL refuses to run as root: drop to an unprivileged user then
    return ["runuser", "-u", _owner(), "--", *args] if os.geteuid() == 0 else args


def missing() -> str | None:
    """Why PostgreSQL cannot be started here, or None."""
    if not (pg_bin("initdb") and pg_bin("pg_ctl")):
        return "PostgreSQL is not installed (initdb, pg_ctl)"
    return None


@contextmanager
def scratch_postgres() -> Iterator[str]:
    """A scratch PostgreSQL server; yields its base URL (without a database name)."""
    initdb, pg_ctl = pg_bin("initdb"), pg_bin("pg_ctl")
    assert initdb and pg_ctl, missing()
    home = Path(tempfile.mkdtemp(prefix="onetool-pg-"))
    data, port = home / "data", free_port()
    quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
    try:
        if os.geteuid() == 0:
            shutil.chown(home, _owner())
        initdb_args = [initdb, "-D", str(data), "-A", "trust", "-U", PG_USER, "--no-sync"]
        subprocess.run(_as_pg_owner(initdb_args), check=True, **quiet)
        options = f"-h 127.0.0.1 -p {port} -k {home} -F"
        start = [pg_ctl, "-D", str(data), "-o", options, "-w", "-l", str(home / "log"), "start"]
        subprocess.run(_as_pg_owner(start), check=True, **quiet)
        wait_for_port(port)
        yield f"postgresql+asyncpg://{PG_USER}@127.0.0.1:{port}"
    finally:
        # Whatever failed on the way: no postmaster and no folder left behind (a stop with none running fails).
        subprocess.run(_as_pg_owner([pg_ctl, "-D", str(data), "-m", "immediate", "stop"]), check=False, **quiet)
        shutil.rmtree(home, ignore_errors=True)


def create_database(base: str, name: str) -> str:
    """A new, empty database on the server at ``base``; its URL."""
    port = base.rsplit(":", 1)[1]
    psql = pg_bin("psql") or "psql"
    connect = [psql, "-h", "127.0.0.1", "-p", port, "-U", PG_USER, "-d", "postgres"]
    subprocess.run([*connect, "-qc", f"CREATE DATABASE {name}"], check=True)
    return f"{base}/{name}"
