"""Hot reload: `onetool reload`, SIGHUP and `watch: true` re-read the config, validate it whole and apply the
difference: added servers start, removed ones stop, changed ones restart, untouched ones keep their connections
and clients their sessions, and `tools/list_changed` follows. A bad file changes nothing and says why."""

from __future__ import annotations

import json
import signal
import uuid
from pathlib import Path
from typing import Any

import pytest

from onetool.config import Config
from onetool.config.reload import Reloaded, restart_needed
from tests.admin_api import admin, cli
from tests.conftest import FIXTURES, PYTHON, TIME_SERVER
from tests.eras import era_clients
from tests.gateways import ServedGateway, processes_with, start_http_gateway, stop, text_of, until, write_config

pytestmark = pytest.mark.anyio

TOKEN = "reload-admin-token"


def fault(marker: str, **extra: Any) -> dict[str, Any]:
    env = {"ONETOOL_TEST_MARKER": marker}
    return {"command": PYTHON, "args": [str(FIXTURES / "fault_server.py"), "ok"], "env": env, **extra}


def start(folder: Path, config: dict[str, Any], marker: str) -> ServedGateway:
    return start_http_gateway(folder, config, marker, env={"ONETOOL_ADMIN_TOKEN": TOKEN})


def reload(folder: Path) -> Any:
    return cli("reload", "--config", str(folder / "onetool.yaml"), "--token", TOKEN)


async def pids(served: ServedGateway, *packs: str) -> list[int]:
    result = await served.run(f"[{', '.join(f'{p}.pid()' for p in packs)}]")
    assert not result.is_error, text_of(result)
    return list(result.structured_content["result"])


async def test_reload_applies_the_difference_and_clients_keep_their_sessions(tmp_path: Path) -> None:
    marker = f"reload-{uuid.uuid4().hex}"
    config = {
        "servers": {
            "kept": fault(marker),
            "changed": fault(marker),
            "filtered": fault(marker),
            "time": {"command": TIME_SERVER, "env": {"ONETOOL_TEST_MARKER": f"{marker}-time"}},
        }
    }
    served = start(tmp_path, config, marker)
    try:
        kept, changed = await pids(served, "kept", "changed")
        async with era_clients(served.url) as clients:
            clients.drain()
            config["servers"].pop("time")
            config["servers"]["added"] = fault(marker)
            config["servers"]["changed"] = fault(marker, timeout=12)
            config["servers"]["filtered"] = fault(marker, tools={"deny": ["crash*"]})
            config["sandbox"] = {"max_calls": 7}
            config["http"] = {"drain_seconds": 3}
            write_config(tmp_path, config)
            done = reload(tmp_path)
            assert done.returncode == 0, done.stderr
            assert done.stdout.startswith("reloaded the gateway at http://127.0.0.1:")
            assert (
                "added: added; removed: time; restarted: changed; updated: filtered; "
                "takes effect at restart: http.drain_seconds" in done.stdout
            )
            await clients.both_heard()  # both eras heard tools/list_changed
            # The same sessions go on, and see the new catalogue and limits.
            for client in (clients.legacy, clients.modern):
                description = (await client.list_tools()).tools[0].description or ""
                assert "\nadded:\n" in description and "\ntime:" not in description
                assert "7 calls" in description
                code = "[t['name'] for t in proxy.list_tools('filtered') if t['name'].startswith('crash')]"
                ran = await client.call_tool("run", {"code": code})
                assert not ran.is_error and text_of(ran) == "[]", text_of(ran)
        now_kept, now_changed = await pids(served, "kept", "changed")
        assert now_kept == kept and now_changed != changed  # untouched kept its process, changed restarted
        assert until(lambda: processes_with(f"{marker}-time") == [])  # the removed server's process is gone
        status, view = admin(served.url, "GET", "/admin/servers/filtered", token=TOKEN)
        assert status == 200 and view["tools_filter"] == {"allow": None, "deny": ["crash*"], "from": "entry"}
    finally:
        assert stop(served.proc) == 0


def waits_for(flag: Path, touch: Path, marker: str) -> dict[str, Any]:
    """The fault fixture behind a shell that first creates ``touch``, then starts the server only once ``flag``
    exists (giving up after 15 s): two of them, each waiting for the other's start, connect only side by side."""
    wait = f'touch "{touch}"; i=0; while [ ! -e "{flag}" ] && [ $i -lt 150 ]; do sleep 0.1; i=$((i+1)); done'
    script = f'{wait}; [ -e "{flag}" ] || exit 3; exec "{PYTHON}" "{FIXTURES / "fault_server.py"}" ok'
    return {"command": "sh", "args": ["-c", script], "env": {"ONETOOL_TEST_MARKER": marker}, "connect_timeout": 30}


async def test_a_reload_connects_the_servers_it_starts_side_by_side(tmp_path: Path) -> None:
    """Each server a reload starts or restarts makes its first attempt at once: one slow to connect does not hold
    the next one back (one after another, the first below would wait for the second forever, and fail)."""
    marker = f"reload-{uuid.uuid4().hex}"
    config: dict[str, Any] = {"servers": {"kept": fault(marker)}}
    served = start(tmp_path, config, marker)
    try:
        one, two = tmp_path / "one-started", tmp_path / "two-started"
        config["servers"]["first"] = waits_for(two, one, marker)
        config["servers"]["second"] = waits_for(one, two, marker)
        write_config(tmp_path, config)
        done = reload(tmp_path)
        assert done.returncode == 0, done.stderr
        assert "added: first, second" in done.stdout, done.stdout
        both = await served.run("[first.echo(message='1'), second.echo(message='2')]")
        assert not both.is_error and both.structured_content == {"result": ["echo: 1", "echo: 2"]}, text_of(both)
    finally:
        assert stop(served.proc) == 0


async def test_a_bad_file_changes_nothing_and_says_why(tmp_path: Path) -> None:
    marker = f"reload-{uuid.uuid4().hex}"
    config = {"servers": {"fx": fault(marker)}}
    served = start(tmp_path, config, marker)
    try:
        before = await pids(served, "fx")
        (tmp_path / "onetool.yaml").write_text("servers:\n  fx: {command: python, timeout: -1}\n  gone: [\n")
        done = reload(tmp_path)
        assert done.returncode == 2, done.stdout
        assert "not reloaded, nothing changed:" in done.stderr and "onetool.yaml" in done.stderr
        write_config(tmp_path, {"servers": {"fx": fault(marker, timeout=-1)}, "sandboxx": {}})
        done = reload(tmp_path)
        assert done.returncode == 2 and "nothing changed" in done.stderr
        assert "timeout" in done.stderr and "sandboxx" in done.stderr, done.stderr
        assert await pids(served, "fx") == before
    finally:
        assert stop(served.proc) == 0


async def test_sighup_reloads_and_a_watched_file_reloads_on_save(tmp_path: Path) -> None:
    marker = f"reload-{uuid.uuid4().hex}"
    packs = tmp_path / "packs"
    packs.mkdir()
    (packs / "greet.py").write_text('def hello() -> str:\n    """Say hello."""\n    return "hello"\n')
    config: dict[str, Any] = {"servers": {"fx": fault(marker)}, "packs": {"dirs": [str(packs)]}}
    served = start(tmp_path, config, marker)
    try:
        config["servers"]["fx2"] = fault(marker)
        write_config(tmp_path, config)
        async with era_clients(served.url) as clients:
            clients.drain()
            served.proc.send_signal(signal.SIGHUP)
            # Both eras hear the added server: a 2026-era client (the SDK's default) on its listen stream.
            await clients.both_heard()
        until(lambda: admin(served.url, "GET", "/admin/servers/fx2", token=TOKEN)[0] == 200)
        assert served.proc.poll() is None  # SIGHUP reloads, it does not end the gateway

        config["watch"] = True
        write_config(tmp_path, config)
        served.proc.send_signal(signal.SIGHUP)
        until(lambda: served.log.read_text().count(f"reloaded {tmp_path / 'onetool.yaml'}") == 2)
        # From now on every save reloads: a pack changed on disk, then a server dropped from the file.
        (packs / "greet.py").write_text(
            'def hello() -> str:\n    return "hi"\n\n\ndef bye() -> str:\n    return "bye"\n'
        )
        until(lambda: text_of_run(served, "[greet.hello(), greet.bye()]") == '["hi","bye"]')
        config["servers"].pop("fx2")
        write_config(tmp_path, config)
        until(lambda: admin(served.url, "GET", "/admin/servers/fx2", token=TOKEN)[0] == 404)
        # A broken save is logged, and the gateway serves on as it was.
        (tmp_path / "onetool.yaml").write_text("servers: [\n")
        until(lambda: "not reloaded, nothing changed" in served.log.read_text())
        assert text_of_run(served, "greet.bye()") == "bye"
    finally:
        assert stop(served.proc) == 0


def text_of_run(served: ServedGateway, code: str) -> str:
    status, body = admin(served.url, "POST", "/admin/run", {"code": code}, TOKEN)
    assert status == 200, body
    return "\n".join(part["text"] for part in body["content"] if part["type"] == "text")


def test_restart_needed_names_what_a_running_gateway_keeps() -> None:
    old = Config.model_validate({"servers": {"a": {"command": "x"}}})
    new = Config.model_validate(
        {
            "servers": {"b": {"command": "y"}},
            "sandbox": {"timeout": 5, "max_workers": 3},
            "http": {"enable_direct_endpoint": True, "drain_seconds": 1},
            "ui": {"show_code": True},
            "registries": [{"name": "r", "url": "https://registry.example"}],
            "watch": True,
        }
    )
    expected = ["http.drain_seconds", "http.enable_direct_endpoint", "registries", "sandbox.max_workers"]
    assert restart_needed(old, new) == expected
    assert restart_needed(new, new) == []


def test_reloaded_says_what_happened() -> None:
    done = Reloaded(added=["a"], updated=["b"], restart_needed=["http.port"])
    assert done.summary() == "added: a; updated: b; takes effect at restart: http.port"
    assert Reloaded().summary() == "no server changed"
    assert json.loads(json.dumps(done.to_dict()))["added"] == ["a"]
