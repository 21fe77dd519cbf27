"""Replicas: an admin change on replica A -> notifications/tools/list_changed on a client of replica B.

Two `onetool serve --http` on one store: a scratch PostgreSQL (LISTEN/NOTIFY, the counter as a fallback), and a
SQLite file shared by both (the change counter alone, read every second). Skipped without PostgreSQL's binaries.
"""

from __future__ import annotations

import os
import random
import sys
import tempfile
import urllib.request
import uuid
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import yaml

from bench import Row, list_changed_delays, median_p90, serving
from tests.postgres import create_database, missing, scratch_postgres

TIME_SERVER = str(Path(sys.executable).with_name("mcp-server-time"))
ONETOOL = str(Path(sys.executable).with_name("onetool"))
TOKEN = "bench-admin-token"
ROUNDS = 20


def _admin(url: str, path: str) -> None:
    request = urllib.request.Request(
        url.rsplit("/mcp", 1)[0] + path, method="POST", headers={"Authorization": f"Bearer {TOKEN}"}
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        response.read()


@contextmanager
def _pair(folder: Path, state_url: str) -> Iterator[tuple[str, str]]:
    config = {
        "servers": {"time": {"command": TIME_SERVER}},
        "state": {"url": state_url},
        "http": {"admin_token": TOKEN},
    }
    urls = []
    with ExitStack() as stack:
        for letter in "AB":
            home = folder / letter
            home.mkdir()
            (home / "onetool.yaml").write_text(yaml.safe_dump(config))
            env = {**os.environ, "ONETOOL_STATE_DIR": str(home / "state"), "ONETOOL_RUNTIME_DIR": str(home / "run")}
            command = [
                ONETOOL,
                "serve",
                "--http",
                "--port",
                "0",
                "--config",
                str(home / "onetool.yaml"),
                "--log-level",
                "WARNING",
            ]
            urls.append(stack.enter_context(serving(command, env)))
        yield urls[0], urls[1]


async def _delays(a: str, b: str, n: int) -> list[float]:
    """Admin request on A starts -> B's /mcp client hears list_changed, alternating quarantine/approve of `time`
    (a change of trust only: neither replica starts or stops a process for it); a random phase against B's
    once-a-second counter read."""

    def change(i: int) -> None:
        _admin(a, f"/admin/servers/time/{'quarantine' if i % 2 == 0 else 'approve'}")

    return await list_changed_delays(b, n, change, lambda: random.uniform(1.0, 2.0))


async def run() -> list[Row]:
    if (why := missing()) is not None:
        return [Row("replicas", "quarantine/approve on A -> list_changed on B", f"skipped: {why}")]
    rows = []
    with tempfile.TemporaryDirectory() as tmp, scratch_postgres() as base:
        folder = Path(tmp)
        (folder / "pg").mkdir()
        with _pair(folder / "pg", create_database(base, f"bench_{uuid.uuid4().hex[:8]}")) as (a, b):
            pg = await _delays(a, b, ROUNDS)
        (folder / "sqlite").mkdir()
        with _pair(folder / "sqlite", f"sqlite+aiosqlite:///{folder / 'shared' / 'onetool.db'}") as (a, b):
            shared = await _delays(a, b, ROUNDS // 2)
    rows.append(
        Row(
            "replicas",
            f"PostgreSQL: quarantine/approve on A -> list_changed on B (median / p90 of {ROUNDS})",
            median_p90(pg),
            "2 s",
        )
    )
    rows.append(
        Row(
            "replicas",
            f"shared SQLite (counter only): quarantine/approve A -> list_changed B (median / p90 of {ROUNDS // 2})",
            median_p90(shared),
            "2 s",
        )
    )
    return rows
