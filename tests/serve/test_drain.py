"""A gateway told to stop drains (`onetool serve`, HTTP and stdio): /ready says 503 at once, new MCP requests are
refused (503 with Retry-After on HTTP, an error result on stdio), the calls in flight finish within
http.drain_seconds and past it end with a clear error; never a 500. Each test stops a gateway of its own."""

from __future__ import annotations

import http.client
import json
import os
import signal
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, types

from tests.admin_api import admin
from tests.conftest import FIXTURES, PYTHON
from tests.gateways import ONETOOL, ServedGateway, get, origin, start_http_gateway, stop, text_of, until, write_config
from tests.processes import START_DEADLINE

SLEEP = "fx.sleep(seconds={})"
ADMIN_TOKEN = "drain-admin-token"


def config(drain_seconds: float) -> dict[str, Any]:
    return {
        "servers": {"fx": {"command": PYTHON, "args": [str(FIXTURES / "fault_server.py"), "ok"], "timeout": 60}},
        "sandbox": {"timeout": 60},
        "http": {"drain_seconds": drain_seconds, "admin_token": ADMIN_TOKEN},
    }


@pytest.fixture
def served(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[ServedGateway]:
    gateway = start_http_gateway(tmp_path, config(request.param), f"drain-{uuid.uuid4().hex}")
    try:
        yield gateway
    finally:
        stop(gateway.proc)  # reaps it and closes its pipe, whether the test stopped it or not


def fx_calls(gateway: ServedGateway) -> int:
    status, body = get(gateway.url, "/status")
    assert status == 200, body
    return next(server["calls_in_flight"] for server in body["servers"] if server["name"] == "fx")


def post(connection: http.client.HTTPConnection, body: Any) -> http.client.HTTPResponse:
    data = json.dumps(body).encode()
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    connection.request("POST", "/mcp", body=data, headers=headers)
    return connection.getresponse()


INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
}


async def listed_run(gateway: ServedGateway, code: str) -> types.CallToolResult:
    """One run, as a client that listed the tools first: the SDK's client lists them after a call to check its
    result otherwise, a request the drained gateway may no longer be there to answer."""
    async with Client(gateway.url, read_timeout_seconds=60) as client:
        await client.list_tools()
        return await client.call_tool("run", {"code": code})


async def run_through_signals(gateway: ServedGateway, seconds: float, *signals: signal.Signals) -> Any:
    """Start a run that sleeps ``seconds`` in fx; once fx has the call, send ``signals``; the run's result."""
    busy = fx_calls(gateway)
    async with anyio.create_task_group() as tg:
        results: list[types.CallToolResult] = []

        async def run() -> None:
            results.append(await listed_run(gateway, SLEEP.format(seconds)))

        tg.start_soon(run)
        await anyio.to_thread.run_sync(until, lambda: fx_calls(gateway) == busy + 1)
        for signum in signals:
            gateway.proc.send_signal(signum)
    return results[0]


@pytest.mark.parametrize("served", [30], indirect=True)
async def test_a_run_in_flight_finishes_while_new_work_is_refused(
    served: ServedGateway, request: pytest.FixtureRequest
) -> None:
    host, port = origin(served.url).removeprefix("http://").split(":")
    kept_alive = http.client.HTTPConnection(host, int(port), timeout=10)
    request.addfinalizer(kept_alive.close)
    kept_alive.request("GET", "/health")
    assert kept_alive.getresponse().read()  # the connection stays open for the next request

    async with anyio.create_task_group() as tg:
        results: list[types.CallToolResult] = []

        async def run() -> None:
            results.append(await listed_run(served, SLEEP.format(3)))

        tg.start_soon(run)
        await anyio.to_thread.run_sync(until, lambda: fx_calls(served) == 1)
        served.proc.send_signal(signal.SIGTERM)

        # From the signal on: not ready, yet alive, and every new MCP request refused, also on a kept-alive
        # connection (it used to reach a stopped session manager: a 500).
        status, body = await anyio.to_thread.run_sync(until, lambda: (r := get(served.url, "/ready"))[0] == 503 and r)
        assert body == {"ready": False, "not_ready": [{"name": "gateway", "status": "draining"}]}
        status, body = await anyio.to_thread.run_sync(get, served.url, "/health")
        assert (status, body["draining"]) == (200, True)
        refused = await anyio.to_thread.run_sync(post, kept_alive, INITIALIZE)
        assert refused.status == 503
        assert refused.getheader("Retry-After") == "5"
        assert refused.getheader("Connection") == "close"
        assert "shutting down" in json.loads(refused.read())["error"]["message"]
        assert served.proc.poll() is None, "the gateway stopped before its run in flight ended"

    [result] = results
    assert not result.is_error, text_of(result)
    assert "slept 3" in text_of(result)
    assert await anyio.to_thread.run_sync(lambda: served.proc.wait(timeout=10)) == 0
    log = served.log.read_text()
    assert "received SIGTERM, draining: 1 call(s) in flight get up to 30 s to finish" in log
    assert "drained, shutting down" in log


async def test_a_2026_era_call_waiting_for_its_clients_answer_is_drained_not_dropped(tmp_path: Path) -> None:
    """A 2026-07-28 client's call that asks its user something waits between two of the client's requests: the
    gateway told to stop counts it until it ends, and takes the client's retry that carries the answer (it continues
    the call; it starts no work)."""
    settings = config(30)
    settings["servers"]["elicit"] = {"command": PYTHON, "args": [str(FIXTURES / "elicit_server.py")], "timeout": 60}
    served = start_http_gateway(tmp_path, settings, f"drain-{uuid.uuid4().hex}")
    try:

        async def answer(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
            served.proc.send_signal(signal.SIGTERM)
            await anyio.to_thread.run_sync(until, lambda: get(served.url, "/ready")[0] == 503)
            return types.ElicitResult(action="accept", content={"text": "answered while draining"})

        async with Client(served.url, read_timeout_seconds=60, elicitation_callback=answer) as client:
            assert client.protocol_version == "2026-07-28"
            await client.list_tools()  # as listed_run: the result is checked against the list without asking again
            result = await client.call_tool("run", {"code": "elicit.note()"})
            assert not result.is_error and "answered while draining" in text_of(result), text_of(result)
        assert await anyio.to_thread.run_sync(lambda: served.proc.wait(timeout=30)) == 0
        log = served.log.read_text()
        assert "draining: 1 call(s) in flight" in log and "drained, shutting down" in log
    finally:
        stop(served.proc)


@pytest.mark.parametrize("served", [1], indirect=True)
async def test_past_drain_seconds_a_run_ends_with_a_clear_error(served: ServedGateway) -> None:
    async with anyio.create_task_group() as tg:
        admin_runs: list[tuple[int, Any]] = []

        async def admin_run() -> None:  # what `onetool run` sends
            body = {"code": SLEEP.format(30)}
            admin_runs.append(
                await anyio.to_thread.run_sync(admin, served.url, "POST", "/admin/run", body, ADMIN_TOKEN)
            )

        tg.start_soon(admin_run)
        await anyio.to_thread.run_sync(until, lambda: fx_calls(served) == 1)
        result = await run_through_signals(served, 30, signal.SIGTERM)
    stopped = "OneTool is shutting down and stopped this call: it was still running 1 s after"
    assert result.is_error
    assert stopped in text_of(result)
    [(status, body)] = admin_runs
    assert status == 200 and body["isError"] and stopped in body["content"][0]["text"]
    assert await anyio.to_thread.run_sync(lambda: served.proc.wait(timeout=10)) == 0
    assert "drained: 2 call(s) still running were stopped" in served.log.read_text()


@pytest.mark.parametrize("served", [60], indirect=True)
async def test_a_second_signal_stops_the_calls_in_flight_at_once(served: ServedGateway) -> None:
    with anyio.fail_after(15):  # far below the 60 s drain and the 30 s run
        result = await run_through_signals(served, 30, signal.SIGTERM, signal.SIGINT)
    assert result.is_error
    assert "shutting down and stopped this call: it was still running when the shutdown was forced" in text_of(result)
    assert await anyio.to_thread.run_sync(lambda: served.proc.wait(timeout=10)) == 0


@pytest.mark.parametrize("served", [30], indirect=True)
def test_an_idle_gateway_stops_at_once(served: ServedGateway) -> None:
    served.proc.send_signal(signal.SIGTERM)
    assert served.proc.wait(timeout=5) == 0
    assert "drained, shutting down" in served.log.read_text()


@pytest.mark.parametrize("served", [30], indirect=True)
async def test_while_draining_a_cancel_still_reaches_its_call_and_a_large_body_is_refused(
    served: ServedGateway, request: pytest.FixtureRequest
) -> None:
    host, port = origin(served.url).removeprefix("http://").split(":")

    def connection() -> http.client.HTTPConnection:
        fresh = http.client.HTTPConnection(host, int(port), timeout=30)
        request.addfinalizer(fresh.close)
        return fresh

    answer = post(connection(), INITIALIZE)
    session = answer.getheader("mcp-session-id")
    answer.read()
    assert session

    def session_post(body: Any) -> http.client.HTTPResponse:
        data = json.dumps(body).encode()
        headers = {
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
            "Mcp-Session-Id": session,
            "Mcp-Protocol-Version": "2025-11-25",
        }
        fresh = connection()
        fresh.request("POST", "/mcp", body=data, headers=headers)
        return fresh.getresponse()

    assert session_post({"jsonrpc": "2.0", "method": "notifications/initialized"}).status == 202
    call = {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "run", "arguments": {"code": ""}}}
    call["params"]["arguments"]["code"] = SLEEP.format(30)  # type: ignore[index]
    async with anyio.create_task_group() as tg:
        answers: list[str] = []

        async def calling() -> None:
            response = await anyio.to_thread.run_sync(session_post, call)
            answers.append((await anyio.to_thread.run_sync(response.read)).decode())

        tg.start_soon(calling)
        await anyio.to_thread.run_sync(until, lambda: fx_calls(served) == 1)
        served.proc.send_signal(signal.SIGTERM)
        await anyio.to_thread.run_sync(until, lambda: get(served.url, "/ready")[0] == 503)

        large = {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"pad": "x" * 100_000}}
        assert (await anyio.to_thread.run_sync(session_post, large)).status == 503
        # A handshake-era call that carries a requestState, as a 2026-era retry does, is still new work: refused.
        posing = {**call, "id": 8, "params": {**call["params"], "requestState": "forged"}}  # type: ignore[dict-item]
        posed = await anyio.to_thread.run_sync(session_post, posing)
        assert "this call did not run" in (await anyio.to_thread.run_sync(posed.read)).decode()
        cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 7}}
        assert (await anyio.to_thread.run_sync(session_post, cancel)).status == 202
        # The cancelled call ends at once, so the drain does, far before the 30 s sleep or drain.
        with anyio.fail_after(10):
            await anyio.to_thread.run_sync(lambda: served.proc.wait(timeout=10))
    assert served.proc.returncode == 0
    assert "slept" not in answers[0]


def test_stdio_drains_the_run_in_flight_and_refuses_new_calls(tmp_path: Path) -> None:
    path = write_config(tmp_path, config(30))
    proc = subprocess.Popen(
        [ONETOOL, "serve", "--config", str(path), "--log-file", str(tmp_path / "gateway.log")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env={**os.environ, "LOG_LEVEL": "DEBUG"},
    )
    assert proc.stdin and proc.stdout

    def send(message: dict[str, Any]) -> None:
        assert proc.stdin
        proc.stdin.write(json.dumps(message) + "\n")
        proc.stdin.flush()

    answers: dict[int, dict[str, Any]] = {}

    def answer(request_id: int) -> dict[str, Any]:
        assert proc.stdout
        while request_id not in answers:
            line = proc.stdout.readline()
            assert line, f"no answer to request {request_id}"
            message = json.loads(line)
            answers[message.get("id")] = message
        return answers[request_id]

    try:
        send(INITIALIZE)
        answer(1)
        send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        # The echo's record says the run is under way, and its sleep in flight.
        run = {"name": "run", "arguments": {"code": "fx.echo(message='go')\n" + SLEEP.format(3)}}
        send({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": run})
        until(lambda: "proxy.tool.call" in (tmp_path / "gateway.log").read_text(), timeout=START_DEADLINE)
        proc.send_signal(signal.SIGTERM)
        until(lambda: "draining" in (tmp_path / "gateway.log").read_text())
        late = {"name": "run", "arguments": {"code": "1 + 1"}}
        send({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": late})
        refused = answer(3)["result"]
        assert refused["isError"] and "shutting down: this call did not run" in refused["content"][0]["text"]
        finished = answer(2)["result"]
        assert not finished.get("isError"), finished
        assert "slept 3" in finished["content"][0]["text"]
        assert proc.wait(timeout=10) == 0
    finally:
        proc.stdin.close()
        stop(proc)
