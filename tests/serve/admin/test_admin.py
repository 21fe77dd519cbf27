"""The admin API: always behind the admin token, changes take effect at once, reach MCP clients as
list_changed within a second, and survive a restart of the gateway."""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from tests.admin_api import admin, discovered
from tests.conftest import TIME_SERVER
from tests.gateways import processes_with, start_http_gateway, stop, text_of

pytestmark = pytest.mark.anyio


def time_config(marker: str) -> dict[str, Any]:
    env = {"ONETOOL_TEST_MARKER": marker}
    return {"servers": {"time": {"command": TIME_SERVER, "args": ["--local-timezone", "UTC"], "env": env}}}


def added_spec(marker: str) -> dict[str, Any]:
    return {"command": TIME_SERVER, "env": {"ONETOOL_TEST_MARKER": f"{marker}-added"}}


async def test_admin_needs_its_token_even_on_loopback_and_bad_requests_say_what_is_wrong(tmp_path: Path) -> None:
    marker = f"adm-{uuid.uuid4().hex}"
    served = start_http_gateway(tmp_path, time_config(marker), marker)
    try:
        for token in (None, "wrong"):
            status, body = admin(served.url, "GET", "/admin/servers", token=token)
            assert status == 401 and body["error"] == "unauthorized"
        # The MCP token is not the admin token: /mcp is token-free on loopback, /admin never is.
        assert admin(served.url, "POST", "/admin/run", {"code": "1"}, token=None)[0] == 401
        status, body = admin(served.url, "GET", "/admin/servers")
        assert status == 200 and [s["name"] for s in body["servers"]] == ["time"]
        assert discovered()["admin_token"] not in served.log.read_text()

        # Bad requests say what is wrong, and change nothing (the same gateway).
        status, body = admin(served.url, "POST", "/admin/servers", {"name": "x", "spec": {"command": "x", "tmeout": 1}})
        assert status == 400 and "servers.x.tmeout: unknown key; did you mean 'timeout'?" in body["error"]
        status, body = admin(served.url, "POST", "/admin/servers", {"name": "time", "spec": {"command": "x"}})
        assert status == 409 and "exists" in body["error"]
        status, body = admin(served.url, "POST", "/admin/servers/nope/enable")
        assert status == 404 and body["error"] == "unknown server 'nope'; servers: time"
        status, body = admin(served.url, "DELETE", "/admin/servers/time")
        assert (status, body["error"]) == (
            400,
            f"server 'time' comes from the config file {tmp_path / 'onetool.yaml'}: remove it from the file, then "
            "`onetool reload` (or SIGHUP to the gateway); with `watch: true` in the file, a save applies at once; or "
            "disable it with `onetool servers disable time`",
        )
        status, body = admin(served.url, "POST", "/admin/servers/time/explode")
        assert (status, body["error"]) == (
            404,
            "unknown action 'explode'; actions: remove, enable, disable, restart, quarantine, approve, reject, "
            "convert, revert",
        )
        status, body = admin(served.url, "POST", "/admin/servers/time/reject", {"tools": []})
        assert (status, body["error"]) == (
            400,
            'reject: expected {"tools": [...]}, a list of at least one held tool\'s name',
        )
        status, body = admin(served.url, "POST", "/admin/run", {"code": "1 +"})
        assert status == 200 and body["isError"] and "SyntaxError" in body["content"][0]["text"]
        status, body = admin(served.url, "POST", "/admin/run", {"code": "{'a': [1, 2]}"})
        assert status == 200 and body == {
            "content": [{"type": "text", "text": '{"a":[1,2]}'}],
            "structuredContent": {"result": {"a": [1, 2]}},
            "isError": False,
            "resultType": "complete",
        }
    finally:
        assert stop(served.proc) == 0


async def test_each_admin_action_reaches_mcp_clients_of_both_eras(tmp_path: Path) -> None:
    marker = f"adm-{uuid.uuid4().hex}"
    served = start_http_gateway(tmp_path, time_config(marker), marker)
    heard: dict[str, list[float]] = {"legacy": [], "modern": []}  # when each era's client got list_changed

    async def on_message(message: Any) -> None:
        if getattr(message, "method", "") == "notifications/tools/list_changed":
            heard["legacy"].append(time.monotonic())

    async def both_hear_after(started: float) -> None:
        """How soon is measured by `make bench` (SC-006: within a second); here, that each era hears it."""
        with anyio.fail_after(10):
            while not all(any(t > started for t in times) for times in heard.values()):
                await anyio.sleep(0.01)

    # (method, path, body, in the run description after it, not in it)
    actions: list[tuple[str, str, dict[str, Any] | None, str, str]] = [
        ("POST", "/admin/servers/time/disable", None, "time: [server disabled", "get_current_time("),
        ("POST", "/admin/servers/time/enable", None, "time:\n  get_current_time(", "disabled"),
        ("POST", "/admin/servers/time/quarantine", None, "list_servers(", "time"),
        ("POST", "/admin/servers/time/approve", None, "time:\n  get_current_time(", "extra"),
        (
            "POST",
            "/admin/servers",
            {"name": "extra", "spec": added_spec(marker)},
            "extra:\n  get_current_time(",
            "[server",
        ),
        ("POST", "/admin/servers/extra/restart", None, "extra:\n  get_current_time(", "[server"),
        ("DELETE", "/admin/servers/extra", None, "time:\n  get_current_time(", "extra"),
    ]
    try:
        async with (
            Client(served.url, mode="legacy", message_handler=on_message),
            Client(served.url) as new,
            new.listen(tools_list_changed=True) as events,
            anyio.create_task_group() as listening,
        ):

            async def listen() -> None:
                async for _ in events:
                    heard["modern"].append(time.monotonic())

            listening.start_soon(listen)
            for method, path, body, present, absent in actions:
                await anyio.sleep(0.3)  # the previous action's notifications have all arrived
                started = time.monotonic()
                async with anyio.create_task_group() as tg:
                    tg.start_soon(anyio.to_thread.run_sync, lambda m=method, p=path, b=body: admin(served.url, m, p, b))
                    await both_hear_after(started)
                description = (await new.list_tools()).tools[0].description or ""
                packs = description.split("\nPacks:\n", 1)[1]
                assert present in packs and absent not in packs, f"{path}: {packs}"
            listening.cancel_scope.cancel()
        assert processes_with(f"{marker}-added") == []  # the removed server's process is gone
    finally:
        assert stop(served.proc) == 0


async def test_overrides_and_added_servers_survive_a_restart(tmp_path: Path) -> None:
    marker = f"adm-{uuid.uuid4().hex}"
    served = start_http_gateway(tmp_path, time_config(marker), marker)
    try:
        assert admin(served.url, "POST", "/admin/servers", {"name": "extra", "spec": added_spec(marker)})[0] == 201
        assert admin(served.url, "POST", "/admin/servers/time/disable")[0] == 200
    finally:
        assert stop(served.proc) == 0
    again = start_http_gateway(tmp_path, time_config(marker), marker)
    try:
        status, body = admin(again.url, "GET", "/admin/servers")
        assert status == 200
        by_name = {s["name"]: s for s in body["servers"]}
        assert by_name["time"]["status"] == "disabled" and not by_name["time"]["enabled"]
        assert by_name["extra"]["status"] == "connected" and by_name["extra"]["added_by"] == "api"
        assert "oauth_status" not in by_name["extra"]  # only an OAuth server has one
        assert text_of(await again.run("extra.get_current_time(timezone='UTC')['timezone']")) == "UTC"
    finally:
        assert stop(again.proc) == 0
