"""Calls: concurrency, timeouts and cancellation reaching the upstream, errors, is_error results, logging."""

from __future__ import annotations

import contextlib
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import pytest
from loguru import logger

from onetool.errors import UpstreamError, UpstreamTimeout, UpstreamUnavailable
from onetool.upstream import UpstreamPool
from tests.conftest import spans
from tests.upstream.conftest import FaultHttpServer, fault, open_pool, wait_for_status


async def _cancellations(log: Path, expected: str) -> list[str]:
    with anyio.fail_after(10):
        while expected not in (lines := log.read_text().splitlines() if log.exists() else []):
            await anyio.sleep(0.02)
    return lines


@pytest.fixture(params=["stdio-auto", "stdio-legacy", "http-auto", "http-legacy"])
async def slow_pool(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    """The fault server over stdio or streamable HTTP, called in either protocol era."""
    transport, mode = request.param.split("-")
    log = tmp_path / "cancelled.log"
    env = {"CANCEL_LOG": str(log)}
    with contextlib.ExitStack() as stack:
        if transport == "http":
            server = stack.enter_context(FaultHttpServer(env))
            config: dict[str, Any] = {"url": server.url, "timeout": 30}
        else:
            config = fault("ok", env=env, timeout=30)
        async with open_pool({"slow": config}, mode=mode) as pool:
            yield pool, log


async def test_timeout_names_server_tool_seconds_and_cancels_upstream(
    slow_pool: tuple[UpstreamPool, Path],
) -> None:
    pool, log = slow_pool
    started = time.monotonic()
    with pytest.raises(UpstreamTimeout) as info:
        await pool.call("slow", "sleep", {"seconds": 20, "tag": "timeout"}, timeout=0.5)
    assert time.monotonic() - started < 10  # the call gave up at its timeout, not the tool's 20 s
    assert str(info.value) == (
        "slow.sleep timed out after 0.5 s and was cancelled; if it needs longer, raise servers.slow.timeout"
    )
    assert (info.value.server, info.value.tool, info.value.seconds) == ("slow", "slow.sleep", 0.5)
    assert "cancelled timeout" in await _cancellations(log, "cancelled timeout")
    # The connection is still usable.
    assert (await pool.call("slow", "echo", {"message": "after"})).content[0].text == "echo: after"


async def test_cancelling_the_caller_cancels_the_upstream(slow_pool: tuple[UpstreamPool, Path]) -> None:
    pool, log = slow_pool
    with anyio.move_on_after(0.5) as scope:
        await pool.call("slow", "sleep", {"seconds": 20, "tag": "caller"})
    assert scope.cancelled_caught
    assert "cancelled caller" in await _cancellations(log, "cancelled caller")
    assert (await pool.call("slow", "echo", {"message": "after"})).content[0].text == "echo: after"


async def test_default_timeout_is_the_servers_config(tmp_path: Path) -> None:
    async with open_pool({"slow": fault("ok", timeout=0.5)}) as pool:
        with pytest.raises(UpstreamTimeout, match=r"after 0\.5 s"):
            await pool.call("slow", "sleep", {"seconds": 10})


async def test_concurrent_calls_on_one_connection_run_concurrently(everything_stdio: dict[str, Any]) -> None:
    async with open_pool({"fx": fault("ok"), "everything": everything_stdio}) as pool:
        started = time.monotonic()
        async with anyio.create_task_group() as tg:
            for i in range(10):
                tg.start_soon(pool.call, "fx", "sleep", {"seconds": 1, "tag": str(i)})
            for _ in range(3):
                tg.start_soon(pool.call, "everything", "trigger-long-running-operation", {"duration": 1, "steps": 2})
        # Serially this is 13 s.
        assert time.monotonic() - started < 6


async def test_jsonrpc_error_raises_upstream_error_with_message() -> None:
    async with open_pool({"fx": fault("ok")}) as pool:
        with pytest.raises(UpstreamError) as info:
            await pool.call("fx", "fail", {"message": "the upstream says no"})
        assert type(info.value) is UpstreamError
        assert str(info.value) == "fx.fail failed: the upstream says no"
        assert info.value.server == "fx" and info.value.tool == "fx.fail"


async def test_is_error_result_is_returned_and_logged_failed(
    everything_stdio: dict[str, Any], log_records: list[dict[str, Any]]
) -> None:
    async with open_pool({"everything": everything_stdio}) as pool:
        result = await pool.call("everything", "no-such-tool", {})
        assert result.is_error
    record = spans(log_records, "proxy.tool.call")[-1]
    assert record["status"] == "FAILED" and record["errorType"] == "ToolError"
    assert "no-such-tool" in record["errorMessage"]


async def test_call_record_fields_and_caller_context(
    everything_stdio: dict[str, Any], log_records: list[dict[str, Any]]
) -> None:
    async with open_pool({"everything": everything_stdio, "fx": fault("ok")}) as pool:
        with logger.contextualize(runId="run-123"):
            await pool.call("everything", "echo", {"message": "hello"})
            await pool.call("fx", "add", {"a": 1, "b": 2})
            with pytest.raises(UpstreamTimeout):
                await pool.call("fx", "sleep", {"seconds": 5}, timeout=0.3)
    echo, add, slow = spans(log_records, "proxy.tool.call")
    assert echo["runId"] == "run-123" and echo["server"] == "everything" and echo["tool"] == "echo"
    assert echo["resultLength"] == len("Echo: hello") and echo["status"] == "SUCCESS"
    assert isinstance(echo["duration"], float)
    assert add["resultLength"] == len('{"result": 3}')
    assert slow["status"] == "FAILED" and slow["errorType"] == "UpstreamTimeout"
    assert slow["errorMessage"].startswith("fx.sleep timed out after 0.3 s")


async def test_following_the_logs_of_a_server_removed_meanwhile_is_quiet() -> None:
    """A run holds the registry it started with: the server it calls may have been removed since. Following its
    logs must not fail (the call itself reports the server as unknown)."""
    async with open_pool({"fx": fault("ok")}) as pool:
        await pool.remove("fx")
        stop = pool.listen_logs("fx", lambda params: None, "debug")
        stop()
        with pytest.raises(UpstreamError, match="unknown server 'fx'"):
            await pool.call("fx", "echo", {"message": "x"})


async def test_a_call_to_a_server_being_removed_says_so() -> None:
    """While its process is being ended (a stubborn one takes the whole grace period), the connection still
    reads as it was: a call then is told that the server is being stopped, not that it is connected."""
    async with open_pool({"fx": fault("stubborn")}) as pool, anyio.create_task_group() as tg:
        await wait_for_status(pool, "fx", "connected", timeout=60)
        tg.start_soon(pool.remove, "fx")
        with anyio.fail_after(10):
            while True:  # answered until its session ends; then refused until the pool forgets it
                try:
                    await pool.call("fx", "echo", {"message": "x"})
                except UpstreamError as e:
                    refused = str(e)
                    break
        assert refused == (
            "server 'fx' is unavailable: it is being stopped (an operator removed, disabled or restarted it just "
            "now); see proxy.list_servers() for what runs now"
        )


async def test_a_server_that_stops_reading_fails_the_call_at_once() -> None:
    """Writing to a server whose stdin is closed fails: the session ends there, and the call with it, rather
    than waiting out its timeout for an answer that cannot come (the server's stdout is still open)."""
    deaf = {"command": sys.executable, "args": [str(Path(__file__).parents[1] / "fixtures" / "deaf_server.py")]}
    async with open_pool({"deaf": {**deaf, "timeout": 30}}, mode="legacy") as pool:
        started = time.monotonic()
        with pytest.raises(UpstreamUnavailable) as info:
            await pool.call("deaf", "echo", {"message": "x"})
    assert time.monotonic() - started < 5, "the call waited for its timeout"
    assert info.value.server == "deaf" and "connection lost" in str(info.value), str(info.value)


async def test_a_reply_longer_than_the_server_cap_ends_its_connection_and_the_next_one_is_made(
    log_records: list[dict[str, Any]],
) -> None:
    """A snippet can ask an upstream for a reply of any size, and the gateway holds each one whole: past
    `max_message_mb` the connection ends where that message starts (its process is stopped), the call fails
    saying why, and the server is connected again for the next call."""
    async with open_pool({"fx": fault("ok", max_message_mb=1)}) as pool:
        with pytest.raises(UpstreamUnavailable) as info:
            await pool.call("fx", "echo", {"message": "x" * 600_000})  # its text twice: 1.2 MB
        assert "sent a message longer than 1 MB (servers.fx.max_message_mb)" in str(info.value), str(info.value)
        await wait_for_status(pool, "fx", "connected")
        assert (await pool.call("fx", "echo", {"message": "x" * 400_000})).structured_content == {
            "result": "echo: " + "x" * 400_000
        }
    warned = [r for r in log_records if r["level"] == "WARNING" and "its process is stopped" in r["message"]]
    assert len(warned) == 1 and warned[0]["extra"]["server"] == "fx", "not once (a failure with a fix is not retried)"
