"""/health, /ready and /status: what probes and operators read, and who may read it."""

from __future__ import annotations

import json
import os
import signal
import uuid
from pathlib import Path

import pytest

from tests.admin_api import cli
from tests.conftest import FIXTURES, PYTHON, TIME_SERVER
from tests.gateways import get, start_http_gateway, stop, text_of, until
from tests.state.conftest import hold_lock, release

pytestmark = pytest.mark.anyio


async def test_ready_turns_503_while_an_upstream_is_down_and_200_when_it_is_back(tmp_path: Path) -> None:
    flag = tmp_path / "refuse"
    # The fixture server refuses to start while the flag file exists, so its restart fails until it is gone.
    starter = (
        f'test -e "{flag}" && {{ echo refusing >&2; exit 3; }}; exec "{PYTHON}" "{FIXTURES / "fault_server.py"}" ok'
    )
    marker = f"st-{uuid.uuid4().hex}"
    config = {
        "servers": {
            "fx": {"command": "sh", "args": ["-c", starter]},
            "time": {"command": TIME_SERVER},
            "off": {"command": "node", "enabled": False},
            "q": {"command": TIME_SERVER, "quarantined": True},
        },
        "http": {"ready_requires_servers": "all"},  # every enabled, non-quarantined server
    }
    served = start_http_gateway(tmp_path, config, marker)
    try:
        assert get(served.url, "/ready") == (200, {"ready": True, "not_ready": []})
        status, health = get(served.url, "/health")
        assert status == 200 and health == {
            "status": "ok",
            "servers": {"connected": 2, "disabled": 1, "quarantined": 1},
            "store": "ok",
            "draining": False,
        }
        pid = json.loads(text_of(await served.run("fx.pid()")))
        flag.touch()
        os.kill(pid, signal.SIGKILL)
        status, body = until(lambda: (r := get(served.url, "/ready"))[0] == 503 and r)
        assert body["ready"] is False and [s["name"] for s in body["not_ready"]] == ["fx"]
        assert get(served.url, "/health")[0] == 200  # alive, if not ready
        flag.unlink()
        until(lambda: get(served.url, "/ready")[0] == 200)
    finally:
        assert stop(served.proc) == 0


async def test_a_store_that_cannot_be_read_makes_the_replica_unready_until_it_can(tmp_path: Path) -> None:
    store = tmp_path / "state.db"
    config = {"servers": {"time": {"command": TIME_SERVER}}, "state": {"url": f"sqlite:///{store}"}}
    served = start_http_gateway(tmp_path, config, f"st-{uuid.uuid4().hex}")
    try:
        assert get(served.url, "/ready") == (200, {"ready": True, "not_ready": []})
        locker = hold_lock(store, "EXCLUSIVE")  # no one may even read it now
        try:
            _, body = until(lambda: (r := get(served.url, "/ready"))[0] == 503 and r)
            assert body["not_ready"] == [{"name": "state store", "status": "unreachable"}]
            assert get(served.url, "/health") == (
                200,
                {"status": "ok", "servers": {"connected": 1}, "store": "unreachable", "draining": False},
            )
        finally:
            release(locker)
        until(lambda: get(served.url, "/ready")[0] == 200)
        assert get(served.url, "/health")[1]["store"] == "ok"
    finally:
        assert stop(served.proc) == 0


async def test_status_shows_each_server_as_clients_may_see_it(tmp_path: Path) -> None:
    marker = f"st-{uuid.uuid4().hex}"
    config = {
        "servers": {
            "time": {"command": TIME_SERVER},
            "broken": {"command": PYTHON, "args": [str(FIXTURES / "fault_server.py"), "exit"], "connect_timeout": 5},
        }
    }
    served = start_http_gateway(tmp_path, config, marker, env={"ONETOOL_TOKEN": "mcp-secret"})
    try:
        assert get(served.url, "/status")[0] == 401  # a token is set: /status needs it, like /mcp
        # Probes do not; /ready requires no server by default, so the failed one does not keep it at 503.
        assert get(served.url, "/health")[0] == 200 and get(served.url, "/ready")[0] == 200
        status, body = get(served.url, "/status", token="mcp-secret")
        assert status == 200
        assert body["endpoints"] == {"/mcp": True, "/mcp/direct": False, "/mcp/inspect": False}
        by_name = {s["name"]: s for s in body["servers"]}
        assert by_name["time"] == {
            "name": "time",
            "pack": "time",
            "type": "stdio",
            "status": "connected",
            "enabled": True,
            "quarantined": False,
            "error": None,
            "fix": None,
            "tool_count": 2,
            "held_tools": [],
            "protocol_version": "2026-07-28",
            "instructions": by_name["time"]["instructions"],
            "added_by": "config",  # no oauth_status: not an OAuth server (test_auth_gateway.py reads it for one)
            "converted_to": None,
            "unresponsive": None,  # set while its calls kept timing out (the breaker is open)
            "calls_in_flight": 0,
            "launch": None,  # only a proposal's (what approving it would run)
            "tools_filter": None,  # every tool offered: no filter in its entry, none set at run time
        }
        assert by_name["broken"]["status"] == "failed" and by_name["broken"]["error"]
        assert "detail" not in by_name["broken"]  # the upstream's stderr is for operators only
    finally:
        assert stop(served.proc) == 0


async def test_an_upstreams_last_stderr_lines_are_for_the_operator_only(tmp_path: Path) -> None:
    config = {"servers": {"fx": {"command": PYTHON, "args": [str(FIXTURES / "fault_server.py"), "crash"]}}}
    served = start_http_gateway(tmp_path, config, f"st-{uuid.uuid4().hex}", env={"ONETOOL_ADMIN_TOKEN": "admin-secret"})
    started, crashing = "fault server: starting in mode crash", "fault server: crashing on purpose"
    try:
        crashed = text_of(await served.run("fx.crash()"))
        # The operator: the crashed process's last lines stay after the restart.
        status, body = until(
            lambda: (
                (r := get(served.url, "/status", token="admin-secret"))[1]["servers"][0]["status"] == "connected"
                and crashing in r[1]["servers"][0]["stderr"]
                and r
            )
        )
        [fx] = body["servers"]
        assert status == 200 and fx["stderr"].count(started) == 2 and "detail" in fx
        shown = cli("servers", "show", "fx")
        assert shown.returncode == 0 and f"  {crashing}\n" in shown.stdout
        # Anyone else, and the model: never.
        [public] = get(served.url, "/status")[1]["servers"]
        assert "stderr" not in public and "detail" not in public
        listed = text_of(await served.run("proxy.list_servers()"))
        assert "fault server" not in crashed and "fault server" not in listed and "fx" in listed
    finally:
        assert stop(served.proc) == 0
