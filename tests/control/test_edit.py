"""Editing a server added at run time: the change restarts it with the new entry, is checked as a config entry,
written over the server's version (of two replicas editing at once one applies, the other gets a 409 with the
server as it is now), and audited with the keys it changed, never their values. Against server-everything
(its get-env tool shows what the running process got) and a real SQLite store shared by two control planes."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import types

from onetool.config import Config, load_config
from onetool.config.served import Served
from onetool.control._server import ServerControl
from onetool.errors import ControlError
from onetool.state import StateStore
from onetool.upstream import UpstreamPool
from tests.conftest import EVERYTHING_JS, TIME_SERVER

pytestmark = pytest.mark.anyio

EVERYTHING = {"command": "node", "args": [str(EVERYTHING_JS), "stdio"]}
CONFIG = Config.model_validate(
    {"servers": {"time": {"command": TIME_SERVER, "args": ["--local-timezone", "UTC"], "quarantined": True}}}
)


@asynccontextmanager
async def control_plane(store: StateStore, config: Config = CONFIG) -> AsyncIterator[ServerControl]:
    """A gateway's control plane on ``store`` (one replica), with its own pool."""
    control = await ServerControl.load(Served(config), store)
    async with UpstreamPool(control.configs()) as pool:
        await control.attach(pool, lambda: None)
        yield control


async def env_of(control: ServerControl, server: str) -> dict[str, Any]:
    """The environment of the running server's process, as its get-env tool reports it."""
    pool = control._live.pool
    result = await pool.call(server, "get-env", {})
    text = "".join(c.text for c in result.content if isinstance(c, types.TextContent))
    return dict(json.loads(text[text.index("{") :]))


async def test_an_edit_restarts_the_server_with_its_new_entry_and_is_audited(tmp_path: Path) -> None:
    async with await StateStore.open(f"sqlite:///{tmp_path / 'onetool.db'}") as store, control_plane(store) as control:
        await control.add("extra", {**EVERYTHING, "env": {"MARK": "1", "KEEP": "k"}}, actor="cli")
        assert (await env_of(control, "extra"))["MARK"] == "1"
        # A server added at run time spends no client's model unless its entry says so; the file's may.
        assert (control.connects("extra").sampling, control.connects("time").sampling) == ("deny", "forward")

        view = await control.edit("extra", {"env": {"MARK": "2", "KEEP": None}, "timeout": 9}, actor="api")
        assert (view.status, view.added_by) == ("connected", "cli")
        env = await env_of(control, "extra")
        assert env["MARK"] == "2" and "KEEP" not in env  # a new process, with the merged entry
        assert (await store.added_servers())["extra"].spec == {**EVERYTHING, "env": {"MARK": "2"}, "timeout": 9}

        # Nothing to change: nothing written, nothing restarted.
        before = await store.change_counter()
        await control.edit("extra", {"timeout": 9}, actor="api")
        assert await store.change_counter() == before

        [edit, add] = await store.audit_log(server="extra")
        assert (edit.actor, edit.action, edit.details) == ("api", "edit_server", {"keys": ["env", "timeout"]})
        assert "2" not in json.dumps(edit.details) and add.action == "add_server"


BAD_EDITS: list[tuple[str, Any, int, str]] = [
    ("time", {"timeout": 5}, 409, "server 'time' comes from the config file: edit it in the file, then `onetool"),
    ("nope", {"timeout": 5}, 404, "unknown server 'nope'; servers: extra, time"),
    ("extra", {"timeout": 0}, 400, "server 'extra': invalid configuration: servers.extra.timeout: Input should be"),
    ("extra", {"timout": 5}, 400, "servers.extra.timout: unknown key; did you mean 'timeout'?"),
    ("extra", {"url": "http://127.0.0.1:9/mcp"}, 400, "give either 'command' (a stdio server) or 'url'"),
    ("extra", {"enabled": False}, 400, "'enabled' is not changed by an edit: use `onetool servers enable|disable"),
    ("extra", {"quarantined": False}, 400, "use `onetool servers quarantine|approve extra`"),
    ("extra", {}, 400, "expected a JSON object: the keys of the server's entry to change (null removes one)"),
    ("extra", [1], 400, "expected a JSON object"),
]
"""(server, patch, status, message): edits refused whole."""


async def test_a_bad_edit_changes_nothing_and_says_why(tmp_path: Path) -> None:
    async with await StateStore.open(f"sqlite:///{tmp_path / 'onetool.db'}") as store:
        await store.add_server("extra", {**EVERYTHING, "enabled": False}, "cli")
        async with control_plane(store) as control:  # one control plane for every case: none changes it
            for name, patch, status, message in BAD_EDITS:
                before = await store.change_counter()
                with pytest.raises(ControlError) as refused:
                    await control.edit(name, patch, actor="cli")
                assert refused.value.status == status and message in str(refused.value), (name, patch)
                assert await store.change_counter() == before, (name, patch)


async def test_of_two_replicas_editing_one_server_at_once_one_applies_the_other_gets_409(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'onetool.db'}"
    async with AsyncExitStack() as stack:
        store_a = await stack.enter_async_context(await StateStore.open(url))
        store_b = await stack.enter_async_context(await StateStore.open(url))
        await store_a.add_server("extra", {**EVERYTHING, "env": {"MARK": "0"}}, "cli")
        # No config file server: each replica runs only what the store adds.
        a = await stack.enter_async_context(control_plane(store_a, Config()))
        b = await stack.enter_async_context(control_plane(store_b, Config()))

        await a.edit("extra", {"env": {"MARK": "a"}}, actor="api")
        # b has not read the store since: its edit is written over a version that is gone
        with pytest.raises(ControlError) as lost:
            await b.edit("extra", {"env": {"MARK": "b"}}, actor="api")
        assert lost.value.status == 409 and "changed meanwhile" in str(lost.value)
        assert lost.value.current is not None and lost.value.current["name"] == "extra"
        # ...and b now serves what won: a's entry, in a restarted process
        assert (await env_of(b, "extra"))["MARK"] == "a"
        assert (await store_b.added_servers())["extra"].spec["env"] == {"MARK": "a"}
        assert [e.action for e in await store_a.audit_log(server="extra")] == ["edit_server", "add_server"]

        # A replica that follows the store applies another's edit on its next reconcile, restarting the server.
        await b.edit("extra", {"env": {"MARK": "b"}}, actor="api")
        await a.reconcile()
        assert (await env_of(a, "extra"))["MARK"] == "b"


async def test_a_remove_that_lost_the_race_is_a_409_and_the_loser_no_longer_serves_the_server(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'onetool.db'}"
    async with AsyncExitStack() as stack:
        store_a = await stack.enter_async_context(await StateStore.open(url))
        store_b = await stack.enter_async_context(await StateStore.open(url))
        await store_a.add_server("extra", {**EVERYTHING, "enabled": False}, "cli")
        a = await stack.enter_async_context(control_plane(store_a, Config()))
        b = await stack.enter_async_context(control_plane(store_b, Config()))

        await a.remove("extra", actor="api")
        with pytest.raises(ControlError) as lost:
            await b.remove("extra", actor="api")
        assert (lost.value.status, lost.value.current) == (409, None) and "removed meanwhile" in str(lost.value)
        # the lost race applied the store on b as any write does: what won is what b serves now
        assert [view.name for view in b.list()] == [] and not b.blind


async def test_a_server_whose_variable_was_unset_stays_disabled(tmp_path: Path) -> None:
    path = tmp_path / "onetool.yaml"
    path.write_text(f"servers:\n  idle: {{command: {TIME_SERVER}, env: {{T: '${{IDLE_TOKEN}}'}}, enabled: false}}\n")
    config = load_config(path, environ={})
    async with await StateStore.open(f"sqlite:///{tmp_path / 'onetool.db'}") as store:
        async with control_plane(store, config) as control:
            with pytest.raises(ControlError) as refused:
                await control.set_enabled("idle", True, actor="cli")
            assert refused.value.status == 409
            assert str(refused.value) == (
                "server 'idle' cannot be enabled: its entry uses IDLE_TOKEN, not set when the config was read; set it "
                "and restart the gateway"
            )
        # Enabled in the store meanwhile (as `onetool servers enable` does with no gateway): it fails alone at
        # start, naming the variable, as a server enabled in the file does.
        await store.set_enabled("idle", True, "cli")
        async with control_plane(store, config) as control:
            view = control.get("idle")
            assert (view.status, view.error) == ("failed", "environment variable IDLE_TOKEN is not set")


async def test_a_quarantined_server_holds_every_tool_and_a_config_server_was_added_by_config(tmp_path: Path) -> None:
    async with await StateStore.open(f"sqlite:///{tmp_path / 'onetool.db'}") as store, control_plane(store) as control:
        with anyio.fail_after(30):
            while control.get("time").tool_count == 0:
                await anyio.sleep(0.05)
        view = control.get("time")
        assert view.status == "quarantined" and view.added_by == "config"
        assert view.held_tools == ["convert_time", "get_current_time"] == sorted(h.tool for h in control.held())
        await control.approve("time", actor="cli")
        assert control.get("time").held_tools == []


@pytest.mark.parametrize(
    ("watch", "then"),
    [
        (
            False,
            "then `onetool reload` (or SIGHUP to the gateway); with `watch: true` in the file, a save applies at once",
        ),
        (True, "the gateway applies it when the file is saved (watch: true)"),
    ],
)
async def test_a_config_file_server_is_changed_in_the_file_and_reloaded(tmp_path: Path, watch: bool, then: str) -> None:
    """Removing or editing it at run time says how the file's change reaches the running gateway."""
    config = CONFIG.model_copy(update={"watch": watch, "path": tmp_path / "onetool.yaml"})
    store_url = f"sqlite:///{tmp_path / 'onetool.db'}"
    async with await StateStore.open(store_url) as store, control_plane(store, config) as control:
        with pytest.raises(ControlError) as removed:
            await control.remove("time", actor="api")
        with pytest.raises(ControlError) as edited:
            await control.edit("time", {"timeout": 5}, actor="api")
    where = f"server 'time' comes from the config file {tmp_path / 'onetool.yaml'}"
    separator = ", " if not watch else "; "
    assert str(removed.value) == (
        f"{where}: remove it from the file{separator}{then}; or disable it with `onetool servers disable time`"
    )
    assert str(edited.value) == f"{where}: edit it in the file{separator}{then}"
