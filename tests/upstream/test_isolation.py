"""One bad upstream costs only its own calls: a cap on calls in flight, a circuit breaker, a liveness probe."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from typing import Any

import anyio
import pytest

from onetool.errors import UpstreamTimeout, UpstreamUnavailable
from onetool.upstream import UpstreamPool
from onetool.upstream._breaker import TRIP_AFTER
from tests.upstream.conftest import fault, open_pool, wait_for_status


async def _pid(pool: UpstreamPool, server: str) -> int:
    return int((await pool.call(server, "pid", {})).structured_content["result"])


@contextmanager
def stopped(pid: int) -> Iterator[None]:
    """The process is stopped (SIGSTOP) for the block: it takes requests on its stdin and answers none."""
    os.kill(pid, signal.SIGSTOP)
    try:
        yield
    finally:
        with suppress(ProcessLookupError):
            os.kill(pid, signal.SIGCONT)


async def _in_flight(pool: UpstreamPool, server: str, count: int) -> None:
    with anyio.fail_after(10):
        while pool.server_status(server).calls_in_flight < count:
            await anyio.sleep(0.01)


async def test_calls_past_the_cap_wait_then_fail_while_other_servers_answer() -> None:
    async with open_pool({"fx": fault("ok", max_concurrent_calls=2), "other": fault("ok")}) as pool:
        async with anyio.create_task_group() as tg:
            long_calls = [anyio.CancelScope() for _ in range(2)]

            async def long_call(scope: anyio.CancelScope) -> None:
                with scope:
                    await pool.call("fx", "sleep", {"seconds": 30})

            for scope in long_calls:
                tg.start_soon(long_call, scope)
            await _in_flight(pool, "fx", 2)

            # The third waits briefly for a slot, then fails naming the server and the key.
            with pytest.raises(UpstreamUnavailable) as busy:
                await pool.call("fx", "echo", {"message": "third"})
            assert str(busy.value).startswith("server 'fx' is unavailable: busy: 2 calls to it are in flight")
            assert "servers.fx.max_concurrent_calls" in str(busy.value)
            # Another server is not limited by fx's calls.
            assert (await pool.call("other", "echo", {"message": "hi"})).content[0].text == "echo: hi"

            # A call that finds the cap full takes the first slot that comes free.
            async def third() -> None:
                result = await pool.call("fx", "echo", {"message": "waited"})
                assert result.content[0].text == "echo: waited"
                tg.cancel_scope.cancel()

            tg.start_soon(third)
            await anyio.sleep(0.1)
            long_calls[0].cancel()
        assert pool.server_status("fx").calls_in_flight == 0


@pytest.mark.parametrize("mode", ["legacy", "auto"])  # MCP ping; tools/list on 2026-07-28, which has no ping
async def test_breaker_opens_on_a_stopped_server_and_a_ping_closes_it(
    mode: str, log_records: list[dict[str, Any]]
) -> None:
    servers = {"fx": fault("ok", timeout=2, connect_timeout=5), "other": fault("ok")}
    # No liveness probe here: the breaker's own ping is what must bring the server back.
    async with open_pool(servers, probe_interval=600, mode=mode) as pool:
        # connect_timeout bounds each start: on a busy machine a first attempt may miss it, a retry will not.
        await wait_for_status(pool, "fx", "connected", timeout=60)
        assert pool.server_status("fx").protocol_version == ("2025-11-25" if mode == "legacy" else "2026-07-28")
        pid = await _pid(pool, "fx")
        with stopped(pid):
            for _ in range(TRIP_AFTER):
                with pytest.raises(UpstreamTimeout):
                    await pool.call("fx", "echo", {"message": "lost"})
            status = pool.server_status("fx")
            assert status.status == "connected" and status.unresponsive is not None
            assert status.unresponsive.startswith(f"unresponsive: {TRIP_AFTER} calls in a row timed out")
            # Calls fail at once, before any is sent: none is in flight.
            with pytest.raises(UpstreamUnavailable) as refused:
                await pool.call("fx", "echo", {"message": "refused"})
            assert str(refused.value).startswith("server 'fx' is unavailable: unresponsive:")
            assert "until it answers a ping, next in" in str(refused.value)
            assert pool.server_status("fx").calls_in_flight == 0
            assert (await pool.call("other", "echo", {"message": "hi"})).content[0].text == "echo: hi"
        with anyio.fail_after(60):  # a ping that went out while it was stopped waits out its 5 s, then backs off
            while pool.server_status("fx").unresponsive is not None:
                await anyio.sleep(0.05)
        # Closed by a ping on the same session: the same process answers, nothing was reconnected.
        assert await _pid(pool, "fx") == pid
    assert any(r["level"] == "WARNING" and "'fx' is unresponsive" in r["message"] for r in log_records)
    assert any(r["level"] == "INFO" and "'fx' answers again" in r["message"] for r in log_records)


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_a_stopped_stdio_server_fails_its_probe_and_is_restarted(
    mode: str, log_records: list[dict[str, Any]]
) -> None:
    async with open_pool({"fx": fault("ok", connect_timeout=8)}, probe_interval=0.3, mode=mode) as pool:
        # connect_timeout bounds the probe's ping and also each start: on a busy machine a start may miss it, a
        # retry will not.
        await wait_for_status(pool, "fx", "connected", timeout=60)
        pid = await _pid(pool, "fx")
        with stopped(pid):
            await wait_for_status(pool, "fx", "disconnected")
            assert (pool.server_status("fx").error or "").startswith("connection lost: health check failed")
        await wait_for_status(pool, "fx", "connected", timeout=60)
        assert await _pid(pool, "fx") != pid
    dropped = [r for r in log_records if r["level"] == "WARNING" and "'fx' disconnected" in r["message"]]
    assert dropped and "health check failed" in dropped[0]["message"]
    assert any(r["level"] == "INFO" and "'fx' reconnected" in r["message"] for r in log_records)
