"""Failure and recovery: crashes fail calls promptly, reconnect with backoff, catalogue refreshes."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from typing import Any

import anyio
import pytest

from onetool.errors import UpstreamUnavailable
from onetool.upstream import UpstreamPool
from onetool.upstream.connection import REVIVE_GAP
from tests.conftest import spans
from tests.upstream.conftest import FaultHttpServer, fault, open_pool, upstream_groups, wait_for_status


async def _changes(pool: UpstreamPool, server: str, received: list[str], timeout: float = 15) -> None:
    with anyio.fail_after(timeout):
        while server not in received:
            await anyio.sleep(0.02)


async def test_crash_fails_in_flight_calls_promptly_then_reconnects(
    log_records: list[dict[str, Any]],
) -> None:
    async with open_pool({"fx": fault("crash", timeout=30)}) as pool, pool.subscribe() as changes:
        seen: list[str] = []
        first_pid = (await pool.call("fx", "pid", {})).structured_content["result"]

        async def collect() -> None:
            async for name in changes:
                seen.append(name)

        async with anyio.create_task_group() as tg:
            tg.start_soon(collect)
            errors: list[BaseException] = []

            async def slow_call() -> None:
                try:
                    await pool.call("fx", "sleep", {"seconds": 25})
                except UpstreamUnavailable as e:
                    errors.append(e)

            tg.start_soon(slow_call)
            await anyio.sleep(0.3)
            started = time.monotonic()
            with pytest.raises(UpstreamUnavailable, match=r"^server 'fx' is unavailable: connection lost"):
                await pool.call("fx", "crash", {})
            with anyio.fail_after(5):  # well under the 30 s call timeout
                while not errors:
                    await anyio.sleep(0.01)
            assert time.monotonic() - started < 5
            assert str(errors[0]).startswith("server 'fx' is unavailable: connection lost")

            # Right after the crash the server is disconnected, with the reason, and calls fail at once.
            st = pool.server_status("fx")
            if st.status == "disconnected":
                assert st.error and "connection lost" in st.error
            await _changes(pool, "fx", seen)

            await wait_for_status(pool, "fx", "connected")
            assert pool.server_status("fx").tool_count > 0
            second_pid = (await pool.call("fx", "pid", {})).structured_content["result"]
            assert second_pid != first_pid
            tg.cancel_scope.cancel()


async def test_read_only_tool_is_retried_once_after_reconnect(tmp_path: Path) -> None:
    mark = tmp_path / "crashed-once"
    async with open_pool({"fx": fault("ok", env={"CRASH_MARK": str(mark)})}) as pool:
        result = await pool.call("fx", "crash_readonly", {})
        assert mark.exists()  # the first process crashed...
        assert result.structured_content == {"result": "survived"}  # ...and the retry on the new one answered


async def test_tool_with_side_effects_is_never_retried() -> None:
    async with open_pool({"fx": fault("crash")}) as pool:
        first_pid = (await pool.call("fx", "pid", {})).structured_content["result"]
        with pytest.raises(UpstreamUnavailable):
            await pool.call("fx", "crash", {})
        await wait_for_status(pool, "fx", "connected")
        assert (await pool.call("fx", "pid", {})).structured_content["result"] != first_pid


async def test_killed_child_is_noticed_without_a_call(everything_stdio: dict[str, Any]) -> None:
    before = upstream_groups()
    async with open_pool({"everything": everything_stdio}) as pool, pool.subscribe() as changes:
        (pid,) = upstream_groups() - before
        os.killpg(pid, signal.SIGKILL)
        with anyio.fail_after(10):
            assert await changes.receive() == "everything"
        st = pool.server_status("everything")
        assert st.status in ("disconnected", "connected")
        await wait_for_status(pool, "everything", "connected")
        assert (await pool.call("everything", "echo", {"message": "back"})).content[0].text == "Echo: back"


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_tools_list_changed_refreshes_the_catalogue(mode: str) -> None:
    async with open_pool({"fx": fault("ok")}, mode=mode) as pool, pool.subscribe() as changes:
        before = {t.name for t in pool.tools("fx")}
        assert "brand_new" not in before
        await pool.call("fx", "add_tool", {"name": "brand_new"})
        with anyio.fail_after(10):
            while "brand_new" not in {t.name for t in pool.tools("fx")}:
                assert await changes.receive() == "fx"
        assert pool.server_status("fx").tool_count == len(before) + 1
        assert (await pool.call("fx", "brand_new", {})).content[0].text == "I am brand_new"


async def test_a_call_to_a_disconnected_http_server_reconnects_at_once_in_one_shared_attempt(
    log_records: list[dict[str, Any]],
) -> None:
    with FaultHttpServer() as server:
        # A background backoff far longer than the test: only the calls themselves can bring the server back.
        servers = {"fx": {"url": server.url, "connect_timeout": 5, "max_backoff": 120}}
        async with open_pool(servers, backoff_base=60) as pool:
            server.kill()
            with pytest.raises(UpstreamUnavailable):  # read-only: one reconnect attempt, which fails
                await pool.call("fx", "echo", {"message": "down"})
            server.start()
            await anyio.sleep(REVIVE_GAP)
            assert pool.server_status("fx").status == "disconnected"
            before = len(spans(log_records, "proxy.connect"))
            answers: list[str] = []

            async def call(n: int) -> None:
                answers.append((await pool.call("fx", "echo", {"message": str(n)})).content[0].text)

            async with anyio.create_task_group() as tg:
                for n in range(5):
                    tg.start_soon(call, n)
            assert sorted(answers) == [f"echo: {n}" for n in range(5)]
            assert [c["status"] for c in spans(log_records, "proxy.connect")[before:]] == ["SUCCESS"]
    assert any(r["level"] == "WARNING" and "'fx' disconnected" in r["message"] for r in log_records)
    assert any(r["level"] == "INFO" and "'fx' reconnected" in r["message"] for r in log_records)


def _retries(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for r in records if r["extra"].get("server") == "fx" and "; next in " in r["message"]]


async def test_backoff_grows_across_short_sessions_up_to_max_backoff(log_records: list[dict[str, Any]]) -> None:
    servers = {"fx": fault("brief", max_backoff=0.4, env={"BRIEF_SECONDS": "0.5"})}
    async with open_pool(servers):
        with anyio.fail_after(60):
            while len(_retries(log_records)) < 5:
                await anyio.sleep(0.05)
    retries = _retries(log_records)
    # A server that dies right after each connect never starts the sequence over...
    assert [r["extra"]["attempt"] for r in retries] == list(range(1, len(retries) + 1))
    assert any("the session lasted only" in r["message"] for r in retries)
    # ...and its pauses grow up to the cap, never past it.
    delays = [r["extra"]["delay"] for r in retries]
    assert max(delays) <= 0.4 and delays[-1] > 0.2, delays


async def test_backoff_starts_over_after_a_stable_session(log_records: list[dict[str, Any]]) -> None:
    servers = {"fx": fault("brief", max_backoff=0.4, env={"BRIEF_SECONDS": "1"})}
    async with open_pool(servers, stable_after=0.2) as pool:
        with anyio.fail_after(60):
            while len([c for c in spans(log_records, "proxy.connect") if c["status"] == "SUCCESS"]) < 3:
                await anyio.sleep(0.05)
        assert pool.server_status("fx").status in ("connected", "disconnected")
    assert not any("the session lasted only" in r["message"] for r in _retries(log_records))
    assert all(r["extra"]["attempt"] == 1 for r in _retries(log_records))
    drops = [r for r in log_records if r["level"] == "WARNING" and "'fx' disconnected" in r["message"]]
    assert len(drops) >= 2
