"""The state store's API, round-tripped through real databases (a SQLite file, and PostgreSQL where installed)."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import stat
import subprocess
import sys
from datetime import UTC
from pathlib import Path

import pytest
from mcp.types import Tool
from sqlalchemy import inspect

from onetool.config import ServerConfig, load_config
from onetool.errors import ConfigError, ServerExists
from onetool.state import StateStore, canonical_json
from onetool.state._migrate import HEAD
from onetool.state.fingerprint import fingerprint_of
from tests.state.conftest import engine_for, sqlite_execute

TABLES = {
    "changes",
    "servers",
    "overrides",
    "approved_tools",
    "rejected_tools",
    "audit_log",
    "conversions",
    "oauth_tokens",
}


def tool(name: str, description: str = "does a thing") -> Tool:
    return Tool(name=name, description=description, input_schema={"type": "object", "properties": {}})


async def test_a_fresh_store_gets_every_table_and_reopening_is_idempotent(store_url: str) -> None:
    async with await StateStore.open(store_url) as store:
        await store.set_enabled("wix", False, "cli")
    async with await StateStore.open(store_url) as store:
        assert (await store.overrides())["wix"].enabled is False
    async with engine_for(store_url) as engine, engine.connect() as conn:
        tables = await conn.run_sync(lambda c: set(inspect(c).get_table_names()))
        versions = (await conn.exec_driver_sql("SELECT version_num FROM alembic_version")).scalars().all()
    assert tables == {*TABLES, "alembic_version"}
    assert versions == [HEAD]


async def test_add_list_and_remove_servers(store_url: str) -> None:
    spec = ServerConfig(command="npx", args=["-y", "pkg"], env={"TOKEN": "s3cret"}).model_dump(
        mode="json", exclude_unset=True
    )
    async with await StateStore.open(store_url) as store:
        added = await store.add_server("wix", spec, "api")
        assert (added.name, added.spec, added.added_by) == ("wix", spec, "api")
        assert added.added_at.tzinfo is UTC
        assert "s3cret" not in repr(added)
        with pytest.raises(ServerExists, match=r"server 'wix' was already added \(by api at .* UTC\); remove it first"):
            await store.add_server("wix", {"url": "http://127.0.0.1:1/mcp"}, "cli")
        await store.set_quarantined("wix", True, "mcp")
        await store.approve_tools("wix", [tool("list_sites")], "api")
    async with await StateStore.open(store_url) as store:
        listed = await store.added_servers()
        assert list(listed) == ["wix"]
        assert listed["wix"] == added
        assert ServerConfig.model_validate(listed["wix"].spec).env == {"TOKEN": "s3cret"}
        assert await store.remove_server("wix", "cli") is True
        assert await store.remove_server("wix", "cli") is False
        assert await store.added_servers() == {}
        assert "wix" not in await store.overrides()
        assert await store.approved_tools("wix") == {}
        log = await store.audit_log(server="wix")
    assert [(e.action, e.actor) for e in log] == [
        ("remove_server", "cli"),
        ("approve_tools", "api"),
        ("set_quarantined", "mcp"),
        ("add_server", "api"),
    ]
    assert log[-1].details == {"keys": ["args", "command", "env"]}
    assert all("s3cret" not in repr(e.details) for e in log)


async def test_bad_input_is_refused_before_it_reaches_the_database(store_url: str) -> None:
    async with await StateStore.open(store_url) as store:
        with pytest.raises(ValueError, match="must be JSON data"):
            await store.add_server("x", {"cwd": Path("/tmp")}, "cli")
        with pytest.raises(ValueError, match="unknown actor 'root'; expected one of api, cli, console, gateway, mcp"):
            await store.set_enabled("x", True, "root")  # type: ignore[arg-type]
        assert await store.added_servers() == {}
        assert await store.audit_log() == []


async def test_overrides_survive_a_restart_and_none_drops_one(store_url: str) -> None:
    async with await StateStore.open(store_url) as store:
        first = await store.set_enabled("time", False, "cli")
        await store.set_quarantined("notion", True, "api")
        await store.set_enabled("notion", True, "api")
    async with await StateStore.open(store_url) as store:
        got = await store.overrides()
        assert list(got) == ["notion", "time"]
        assert (got["time"].enabled, got["time"].quarantined, got["time"].updated_by) == (False, None, "cli")
        assert (got["notion"].enabled, got["notion"].quarantined) == (True, True)
        cleared = await store.set_enabled("time", None, "api")
    assert cleared.enabled is None
    assert cleared.created_at == first.created_at
    assert cleared.updated_at > first.updated_at
    assert cleared.updated_by == "api"


async def test_enabled_by_is_who_last_enabled_or_disabled_not_who_changed_something_else(store_url: str) -> None:
    async with await StateStore.open(store_url) as store:
        await store.set_enabled("time", False, "cli")
        await store.set_quarantined("time", True, "mcp")
        assert (await store.overrides())["time"].enabled_by == "cli"
        await store.set_enabled("time", True, "mcp")
        assert (await store.overrides())["time"].enabled_by == "mcp"
        assert (await store.set_enabled("time", None, "api")).enabled_by is None


async def test_a_proposal_is_kept_as_one_until_an_operator_accepts_it(store_url: str) -> None:
    async with await StateStore.open(store_url) as store:
        added = await store.add_server("p", {"command": "x"}, "mcp", proposed=True)
        assert added.proposed and not (await store.add_server("q", {"command": "x"}, "cli")).proposed
    async with await StateStore.open(store_url) as store:
        assert (await store.added_servers())["p"].proposed
        assert await store.accept_proposal("p", "cli", {"command": "x"})
        assert not await store.accept_proposal("p", "cli", {"command": "x"})  # done already
        assert not await store.accept_proposal("q", "cli", {})  # never was one
        assert not (await store.added_servers())["p"].proposed
        actions = [(e.actor, e.action, e.details) for e in reversed(await store.audit_log(server="p"))]
    assert actions == [("mcp", "propose_server", {"keys": ["command"]}), ("cli", "accept_proposal", {"command": "x"})]


async def test_approval_records_who_and_the_tools_and_quarantine_withdraws_it(store_url: str) -> None:
    async with await StateStore.open(store_url) as store:
        await store.set_quarantined("wix", True, "mcp")
        approved = await store.approve_server("wix", "cli", [tool("a"), tool("b")])
        assert (approved.quarantined, approved.approved_by) == (False, "cli")
        assert approved.approved_at == approved.updated_at
        # approving again with the current tools replaces the set: "b" is gone upstream, "c" is new
        await store.approve_server("wix", "api", [tool("a"), tool("c")])
        assert list(await store.approved_tools("wix")) == ["a", "c"]
        # without tools the approved set stays
        await store.approve_server("wix", "api")
        assert list(await store.approved_tools("wix")) == ["a", "c"]
        again = await store.set_quarantined("wix", True, "api")
        assert (again.quarantined, again.approved_by, again.approved_at) == (True, None, None)
        assert list(await store.approved_tools("wix")) == ["a", "c"]  # kept, to diff at the next approval


async def test_approve_tools_stores_the_definition_and_its_fingerprint(store_url: str) -> None:
    async with await StateStore.open(store_url) as store:
        await store.approve_tools("wix", [tool("a", "old"), tool("b")], "api")
        changed = await store.approve_tools("wix", [tool("a", "new")], "cli")
        stored = await store.approved_tools("wix")
    assert list(changed) == ["a"]
    assert stored["a"] == changed["a"]
    assert stored["a"].definition == canonical_json(tool("a", "new"))
    assert stored["a"].fingerprint == fingerprint_of(stored["a"].definition)
    assert stored["a"].approved_by == "cli"
    assert stored["b"].approved_by == "api"  # untouched by the second approval


async def test_a_rejection_is_kept_by_fingerprint_until_the_tool_or_its_server_is_approved(store_url: str) -> None:
    async with await StateStore.open(store_url) as store:
        await store.approve_server("wix", "cli", [tool("a", "old"), tool("b")])
        before = await store.change_counter()
        rejected = await store.reject_tools("wix", [tool("a", "evil"), tool("c")], "api")
        assert await store.change_counter() == before + 1
        snapshot = await store.snapshot()
        assert snapshot.rejections == {"wix": rejected}
        assert rejected["a"].fingerprint == fingerprint_of(canonical_json(tool("a", "evil")))
        assert rejected["a"].rejected_by == "api"
        assert (await store.approved_tools("wix"))["a"].definition == canonical_json(tool("a", "old"))  # kept
        audit = [(e.action, e.details) for e in reversed(await store.audit_log(server="wix"))][-2:]
        assert audit == [
            ("reject_tool", {"tool": "a", "fingerprint": rejected["a"].fingerprint}),
            ("reject_tool", {"tool": "c", "fingerprint": rejected["c"].fingerprint}),
        ]

        await store.approve_tools("wix", [tool("a", "evil")], "cli")  # changed their mind: a is approved
        assert list((await store.snapshot()).rejections["wix"]) == ["c"]
        await store.approve_server("wix", "cli", [tool("a", "evil"), tool("b"), tool("c")])
        assert (await store.snapshot()).rejections == {}

        await store.reject_tools("wix", [tool("b", "changed")], "api")
        await store.forget_server("wix", "cli")
        assert (await store.snapshot()).rejections == {}


async def test_all_approved_tools_is_every_server_read_one_by_one(store_url: str) -> None:
    async with await StateStore.open(store_url) as store:
        assert await store.all_approved_tools() == {}
        await store.approve_server("wix", "cli", [tool("b"), tool("a")])
        await store.approve_tools("notion", [tool("search", "finds")], "api")
        await store.approve_server("empty", "cli", [])  # approved with no tools: nothing to list
        await store.approve_tools("held", [tool("x")], "cli")
        await store.set_quarantined("held", True, "api")  # fingerprints kept while quarantined
        everything = await store.all_approved_tools()
        one_by_one = {name: await store.approved_tools(name) for name in ("held", "notion", "wix")}
    assert everything == one_by_one
    assert list(everything) == ["held", "notion", "wix"] and list(everything["wix"]) == ["a", "b"]


async def test_forget_server_drops_overrides_and_approvals_only_of_that_server(store_url: str) -> None:
    async with await StateStore.open(store_url) as store:
        for name in ("gone", "kept"):
            await store.set_enabled(name, False, "cli")
            await store.approve_tools(name, [tool("t")], "cli")
        await store.forget_server("gone", "api")
        assert list(await store.overrides()) == ["kept"]
        assert await store.approved_tools("gone") == {}
        assert list(await store.approved_tools("kept")) == ["t"]
        assert (await store.audit_log(limit=1))[0].action == "forget_server"


async def test_record_and_read_the_audit_log(store_url: str) -> None:
    diff = {"tool": "a", "diff": "-old\n+new"}
    async with await StateStore.open(store_url) as store:
        await store.record("restart", "api", "wix")
        await store.record("tools_changed", "gateway", "wix", diff)
        await store.record("started", "gateway")
        entries = await store.audit_log()
        assert [e.action for e in entries] == ["started", "tools_changed", "restart"]
        assert entries[1].details == diff
        assert entries[0].server is None
        assert [e.action for e in await store.audit_log(server="wix", limit=1)] == ["tools_changed"]
        with pytest.raises(dataclasses.FrozenInstanceError):
            entries[0].action = "x"  # type: ignore[misc]


async def test_concurrent_changes_from_many_tasks_all_land(store_url: str) -> None:
    async with await StateStore.open(store_url) as store:
        await asyncio.gather(*(store.set_enabled(f"s{i}", i % 2 == 0, "api") for i in range(20)))
        got = await store.overrides()
    assert {name: o.enabled for name, o in got.items()} == {f"s{i}": i % 2 == 0 for i in range(20)}


async def test_default_store_is_a_private_file_in_the_state_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a gateway without a config file has a project of its own too, "default"
    folder = tmp_path / "xdg" / "onetool" / "projects" / "default"
    monkeypatch.delenv("ONETOOL_STATE_DIR", raising=False)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg"))
    async with await StateStore.open() as store:
        assert store.location == str(folder / "onetool.db")
        await store.set_enabled("x", True, "cli")
    for private in (folder, folder.parent, folder.parent.parent):
        assert stat.S_IMODE(os.stat(private).st_mode) == 0o700
    assert stat.S_IMODE(os.stat(folder / "onetool.db").st_mode) == 0o600
    assert sqlite_execute(folder / "onetool.db", "SELECT server, enabled FROM overrides") == [("x", 1)]


@pytest.mark.parametrize("form", ["sqlite:///{}", "sqlite+aiosqlite:///{}"])
async def test_a_plain_sqlite_url_gets_the_async_driver(tmp_path: Path, form: str) -> None:
    url = form.format(tmp_path / "s.db")
    async with await StateStore.open(url) as store:
        await store.set_enabled("x", False, "cli")
    assert sqlite_execute(tmp_path / "s.db", "SELECT count(*) FROM overrides") == [(1,)]


async def test_an_in_memory_store_keeps_its_data_while_open() -> None:
    async with await StateStore.open("sqlite://") as store:
        await store.set_enabled("x", False, "cli")
        assert (await store.overrides())["x"].enabled is False
        assert store.location == "sqlite+aiosqlite://"


def test_opening_a_store_writes_nothing_to_stdout_or_stderr(tmp_path: Path) -> None:
    # stdout is the MCP channel in stdio mode: migrations must not print
    url = f"sqlite:///{tmp_path / 's.db'}"
    code = (
        "import asyncio\n"
        "from onetool.state import StateStore\n"
        "async def main():\n"
        f"    async with await StateStore.open({url!r}) as store:\n"
        "        await store.set_enabled('x', True, 'cli')\n"
        "asyncio.run(main())\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert (done.stdout, done.stderr) == ("", "")


def test_the_config_names_the_store(tmp_path: Path) -> None:
    config = tmp_path / "onetool.yaml"
    config.write_text("state:\n  url: postgresql+asyncpg://onetool:${PGPASS}@db/onetool\n")
    loaded = load_config(config, environ={"PGPASS": "pw"})
    assert loaded.state.url == "postgresql+asyncpg://onetool:pw@db/onetool"
    assert "pw" not in repr(loaded)
    assert load_config(None).state.url is None
    config.write_text("state:\n  path: /tmp/x.db\n")
    with pytest.raises(ConfigError, match=r"state\.path: unknown key \(allowed here: url, dir\)"):
        load_config(config)


async def test_several_processes_opening_a_fresh_store_at_once_all_succeed(store_url: str) -> None:
    # separate engines are separate connections, as separate gateways (replicas) would have
    stores = await asyncio.gather(*(StateStore.open(store_url) for _ in range(4)))
    try:
        await asyncio.gather(*(store.set_enabled(f"s{i}", True, "api") for i, store in enumerate(stores)))
        assert list(await stores[0].overrides()) == ["s0", "s1", "s2", "s3"]
    finally:
        await asyncio.gather(*(store.aclose() for store in stores))
