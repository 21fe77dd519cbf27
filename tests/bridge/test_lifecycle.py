"""Children of a real bridge: restarted after a crash at the same URL, stopped when idle, all gone on shutdown.

The tests that need no flag of their own share the module's bridge (tests/bridge/conftest.py) and leave it serving
nothing; the shutdown test is also the one that reads the whole log of its bridge for env values."""

from __future__ import annotations

import os
import signal
from typing import Any

import pytest

from tests.bridge.conftest import BridgeProcess, everything, fault, mcp_client, process_groups, wait_until

pytestmark = pytest.mark.anyio


async def _call_echo(url: str, mode: str = "auto") -> str:
    async with mcp_client(url, mode) as client:
        result = await client.call_tool("echo", {"message": "ping"})
    return str(result.content[0].text)  # type: ignore[union-attr]


async def test_a_crashed_child_is_restarted_at_the_same_url(bridge: BridgeProcess) -> None:
    created = bridge.convert(everything("crashy"))
    seen: set[int] = set()
    for cycle in range(3):
        (pid,) = bridge.children()
        seen.add(pid)
        os.kill(pid, signal.SIGKILL)
        # The next call waits for the restart instead of failing.
        assert await _call_echo(created["url"], "legacy" if cycle % 2 else "auto") == "Echo: ping"
        current = bridge.api("GET", "/convert/crashy").json()
        assert current == created, "same URL, same port, running again"
    (last,) = bridge.children()
    assert last not in seen
    assert all(state != "Z" for state in bridge.children().values()), "every dead child was reaped"
    assert process_groups(seen) == []
    assert bridge.api("DELETE", "/convert/crashy").status_code == 200
    assert bridge.children() == {}


async def test_an_idle_server_stops_and_restarts_on_the_next_request(bridge_factory: Any) -> None:
    bridge: BridgeProcess = bridge_factory("--base-port", "0", "--idle-timeout", "0.02")  # 1.2 s
    created = bridge.convert(everything("sleepy"))
    async with mcp_client(created["url"]) as client:
        assert (await client.call_tool("echo", {"message": "one"})).content
        (first,) = bridge.children()
        wait_until(lambda: bridge.children() == {}, what="the idle child to stop")
        assert bridge.api("GET", "/convert/sleepy").json()["status"] == "idle"
        assert process_groups({first}) == []
        # Same client session, same URL: the request starts the server again.
        result = await client.call_tool("echo", {"message": "two"})
        assert result.content[0].text == "Echo: two"  # type: ignore[union-attr]
        assert bridge.api("GET", "/convert/sleepy").json()["status"] == "running"
        assert set(bridge.children()) and first not in bridge.children()


def test_delete_ends_a_stubborn_process_group(bridge: BridgeProcess) -> None:
    bridge.convert(fault("stubborn", "stubborn"))
    groups = set(bridge.children())
    assert bridge.api("DELETE", "/convert/stubborn").status_code == 200
    assert process_groups(groups) == []
    assert bridge.children() == {}


async def test_env_values_never_reach_the_log_and_shutdown_ends_every_child_and_process_group_within_5_s(
    bridge_factory: Any,
) -> None:
    secret = "s3cr3t-bridge-value-8731"
    bridge: BridgeProcess = bridge_factory("--base-port", "0")  # logs at DEBUG
    created = bridge.convert(everything("secretive", env={"BRIDGE_SECRET": secret}))
    async with mcp_client(created["url"]) as client:
        env = await client.call_tool("get-env", {})
        assert secret in str(env.content), "the child got it"
    (pid,) = bridge.children()
    os.kill(pid, signal.SIGKILL)
    assert await _call_echo(created["url"]) == "Echo: ping"
    bad = bridge.api("POST", "/convert", json=everything("bad", env={"BRIDGE_SECRET": secret, "N": 1}))
    assert bad.status_code == 400 and secret not in bad.text
    again = bridge.api("POST", "/convert", json=everything("secretive", env={"BRIDGE_SECRET": secret}))
    assert again.status_code == 409 and secret not in again.text
    bridge.api("DELETE", "/convert/secretive")

    # Shutdown ends every child and every process group, a stubborn one's too.
    bridge.convert(everything("e1"))
    bridge.convert(fault("stubborn", "stubborn"))  # ignores SIGTERM and leaves a grandchild in its group
    groups = set(bridge.children())
    assert len(groups) == 2
    assert len(process_groups(groups)) >= 3, "the stubborn server's grandchild is in its group"
    took = bridge.stop()
    assert took < 5.0, f"shutdown took {took:.1f} s"
    assert bridge.process.returncode == 0
    assert process_groups(groups) == []

    log = bridge.log.read_text() + bridge.log.with_suffix(".stderr").read_text()
    assert secret not in log
    assert "bridge.convert" in log and "DEBUG" in log, "the log was written, at DEBUG"
