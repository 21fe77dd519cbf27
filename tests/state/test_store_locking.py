"""Reads share SQLite's file with a writer; writes wait for each other: a real SQLite file, and a writer in another
process holding its transaction open (BEGIN IMMEDIATE, as a store write does)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from mcp.types import Tool

from onetool.errors import StateError
from onetool.state import StateStore
from tests.state.conftest import hold_lock, release

TIMEOUT = 1.0  # the busy timeout: a read that waited for the writer would fail after it


async def _filled(db: Path) -> StateStore:
    store = await StateStore.open(f"sqlite:///{db}", timeout=TIMEOUT)
    await store.add_server("added", {"command": "x"}, "cli")
    await store.set_enabled("added", False, "cli")
    tools = [Tool(name="t", input_schema={"type": "object"})]
    await store.approve_server("added", "cli", tools)
    await store.record_conversion("added", command="x", args=[], env={}, url="http://127.0.0.1:1/mcp", actor="api")
    await store.save_oauth_record("added", "{}")
    return store


async def _every_read(store: StateStore) -> list[object]:
    return [
        await store.added_servers(),
        await store.overrides(),
        await store.approved_tools("added"),
        await store.all_approved_tools(),
        await store.conversions(),
        await store.conversion("added"),
        await store.oauth_record("added"),
        await store.audit_log(),
    ]


async def test_every_read_succeeds_while_another_process_is_writing(tmp_path: Path) -> None:
    db = tmp_path / "onetool.db"
    async with await _filled(db) as store:
        expected = await _every_read(store)
        holder = hold_lock(db, "IMMEDIATE")
        try:
            assert await _every_read(store) == expected  # not "database is locked" after TIMEOUT
        finally:
            release(holder)


async def test_a_write_waits_for_the_writer_then_fails_clearly(tmp_path: Path) -> None:
    db = tmp_path / "onetool.db"
    async with await _filled(db) as store:
        holder = hold_lock(db, "IMMEDIATE")
        try:
            started = time.monotonic()
            with pytest.raises(StateError, match="cannot change the overrides of 'added': database is locked"):
                await store.set_enabled("added", True, "cli")
            assert time.monotonic() - started >= TIMEOUT * 0.8, "it waited for the lock, as long as allowed"
        finally:
            release(holder)
        assert (await store.overrides())["added"].enabled is False, "nothing half written"
