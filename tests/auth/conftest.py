"""One token store shared by two "replicas": two store objects on the same PostgreSQL database, SQLite file, token
folder or OS keyring (keyrings.alt's file backend, the keyring package's own), as two processes have them (nothing
shared in memory)."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import keyring
import pytest
from keyrings.alt.file import PlaintextKeyring

from onetool.auth import FileTokenStore, StateTokenStore, TokenStore
from onetool.auth.store import KeyringTokenStore
from onetool.state import StateStore
from tests.postgres import create_database

STORE_TIMEOUT = 1.0
"""Seconds a store's ordinary transactions (and a FileTokenStore's save) wait for a lock held elsewhere."""

Kind = Literal["postgresql", "sqlite", "file", "keyring"]


@dataclass(frozen=True)
class SharedStore:
    kind: Kind
    where: str
    """The PostgreSQL or SQLite URL, or the token folder: what another process opens."""
    a: TokenStore
    b: TokenStore


def state_url(kind: Kind, request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A new state store: a fresh PostgreSQL database (skips without PostgreSQL), or a SQLite file."""
    if kind == "postgresql":
        return create_database(request.getfixturevalue("postgres"), f"tokens_{uuid.uuid4().hex[:12]}")
    return f"sqlite+aiosqlite:///{tmp_path / 'state' / 'onetool.db'}"


@pytest.fixture(params=["postgresql", "sqlite", "file", "keyring"])
async def shared(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[SharedStore]:
    kind: Kind = request.param
    if kind == "file":
        folder = tmp_path / "oauth"
        yield SharedStore(kind, str(folder), *(FileTokenStore(folder, wait=STORE_TIMEOUT) for _ in "ab"))
        return
    if kind == "keyring":
        with keyring_in(tmp_path / "keyring.cfg"):
            locks = tmp_path / "locks"
            yield SharedStore(kind, str(locks), *(KeyringTokenStore({}, locks, wait=STORE_TIMEOUT) for _ in "ab"))
        return
    where = state_url(kind, request, tmp_path)
    async with (
        await StateStore.open(where, timeout=STORE_TIMEOUT) as a,
        await StateStore.open(where, timeout=STORE_TIMEOUT) as b,
    ):
        yield SharedStore(kind, where, StateTokenStore(a), StateTokenStore(b))


@contextmanager
def keyring_in(path: Path) -> Iterator[PlaintextKeyring]:
    """This process's keyring: a file at ``path`` while inside (the keyring package keeps one per process)."""
    previous = keyring.get_keyring()
    backend = PlaintextKeyring()
    backend.file_path = str(path)
    keyring.set_keyring(backend)
    try:
        yield backend
    finally:
        keyring.set_keyring(previous)
