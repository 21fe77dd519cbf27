"""Replicas as real processes: `onetool serve --http` gateways sharing one state store (PostgreSQL, or a SQLite
file), each with its own runtime folder, admin token and upstream processes."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.admin_api import admin
from tests.conftest import FIXTURES, PYTHON
from tests.gateways import ServedGateway, start_http_gateway, stop
from tests.postgres import create_database

TOKEN = "replica-admin-token"


def fx_spec() -> dict[str, Any]:
    return {"command": PYTHON, "args": [str(FIXTURES / "fault_server.py"), "ok"]}


@dataclass(frozen=True)
class Replica:
    name: str
    served: ServedGateway

    @property
    def url(self) -> str:
        return self.served.url

    def admin(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        return admin(self.url, method, path, body, token=TOKEN)

    def server(self, name: str) -> dict[str, Any] | None:
        """The server as this replica's admin API shows it; None when it does not know it."""
        status, body = self.admin("GET", f"/admin/servers/{name}")
        assert status in (200, 404), (status, body)
        return body if status == 200 else None


@contextmanager
def replicas(
    base: Path,
    state_url: str,
    count: int = 2,
    *,
    servers: dict[str, Any] | None = None,
    http: dict[str, Any] | None = None,
) -> Iterator[list[Replica]]:
    """``count`` gateways on the store at ``state_url``, each serving `fx` (the fault fixture server) and
    ``servers`` (which may replace `fx`), with ``http`` added to their http section."""
    config = {
        "servers": {"fx": fx_spec(), **(servers or {})},
        "state": {"url": state_url},
        "http": {"admin_token": TOKEN, **(http or {})},
    }
    with ExitStack() as stack:
        started = []
        for letter in "ABC"[:count]:
            folder = base / letter
            folder.mkdir()
            marker = f"replica-{letter}-{uuid.uuid4().hex}"
            env = {"ONETOOL_RUNTIME_DIR": str(folder / "run"), "ONETOOL_STATE_DIR": str(folder / "state")}
            served = start_http_gateway(folder, config, marker, env=env)
            stack.callback(stop, served.proc)
            started.append(Replica(letter, served))
        yield started


@pytest.fixture(scope="module")
def pg_state(postgres: str) -> str:
    """A fresh PostgreSQL database for the module's replicas."""
    return create_database(postgres, f"replicas_{uuid.uuid4().hex[:12]}")


@pytest.fixture(scope="module")
def pg_pair(pg_state: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Replica, Replica]]:
    """Two replicas on one PostgreSQL database, for the module's tests."""
    with replicas(tmp_path_factory.mktemp("replicas"), pg_state) as (a, b):
        yield a, b
