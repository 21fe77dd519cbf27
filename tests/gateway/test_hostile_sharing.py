"""What one run can take from everyone else, through a real `onetool serve --http` (issue 42, classes 11 and 12):
a shared upstream (no argument leaves the gateway unchecked or past its server's cap, and a run that ends cancels
its calls upstream), and the gateway's own memory and event loop (a large result is cut where it is made, code is
compiled within a node budget).

The upstreams are the fault fixture server over stdio (``fx``) and over streamable HTTP (``fxh``), each with a
3 s timeout, as a hosted upstream would have: a run that made either check a million bad items would leave it
unable to answer the next client's call within that. ``fx_slow`` and ``fxh_slow`` are the same servers with a
timeout past the runs' deadline.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from sandbox.worker.policy import MAX_NODES
from tests.conftest import FIXTURES, PYTHON
from tests.gateway.test_hostile_gateway import attack
from tests.gateways import ServedGateway, start_http_gateway, stop, text_of
from tests.upstream.conftest import FaultHttpServer

pytestmark = pytest.mark.anyio

SERVERS = ("fx", "fxh")
SLOW = ("fx_slow", "fxh_slow")
DEADLINE = 20
"""Seconds a run may take: the worker alone takes seconds to send a million items on a loaded machine."""


class Shared:
    def __init__(self, gateway: ServedGateway, sleeps: Path, cancels: Path) -> None:
        self.gateway, self.sleeps, self.cancels = gateway, sleeps, cancels

    async def started(self, tag: str) -> None:
        """Until the upstream's ``sleep`` tagged ``tag`` is running."""
        await _line(self.sleeps, f"started {tag}")

    async def cancelled(self, tag: str) -> None:
        """Until the upstream was told that the call tagged ``tag`` is cancelled."""
        await _line(self.cancels, f"cancelled {tag}")


async def _line(log: Path, line: str) -> None:
    with anyio.fail_after(20):
        while not (log.exists() and line in log.read_text().splitlines()):
            await anyio.sleep(0.02)


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Shared]:
    folder = tmp_path_factory.mktemp("sharing")
    marker = f"sharing-{uuid.uuid4().hex}"
    logs = {"SLEEP_LOG": str(folder / "sleeps.log"), "CANCEL_LOG": str(folder / "cancels.log")}
    env = {"ONETOOL_TEST_MARKER": marker, **logs}
    stdio = {"command": PYTHON, "args": [str(FIXTURES / "fault_server.py"), "ok"], "env": env}
    with FaultHttpServer(env) as http:
        config = {
            "servers": {
                "fx": {**stdio, "timeout": 3},
                "fxh": {"url": http.url, "timeout": 3, "max_argument_mb": 1},
                # The same servers with a timeout past the runs' deadline: their calls are still going when it comes.
                "fx_slow": {**stdio, "timeout": 120},
                "fxh_slow": {"url": http.url, "timeout": 120},
            },
            "http": {"enable_direct_endpoint": True, "enable_inspect_endpoint": True},
            # Workers of 1 GB, as the hostile bench has them: what a run sends must reach the host to count.
            "sandbox": {"timeout": DEADLINE, "memory_mb": 1024},
        }
        gateway = start_http_gateway(folder, config, marker)
        try:
            yield Shared(gateway, Path(logs["SLEEP_LOG"]), Path(logs["CANCEL_LOG"]))
        finally:
            assert stop(gateway.proc) == 0


async def _next_client_is_served(shared: Shared, server: str, pid: str) -> None:
    """Another client's call to ``server`` right after: answered within the server's 3 s timeout, by the same
    process (a stdio server the gateway had to restart would have another pid)."""
    after = await shared.gateway.run(f"[{server}.list_sites(), {server}.pid()]")
    assert not after.is_error, text_of(after)
    assert after.structured_content == {"result": [["main", "shop"], int(pid)]}


PAYLOADS = {
    # The round's own: a 3 MB argument whose every item lacks its required keys.
    "a million bad items": ("{s}.create_orders(orders=[{{}}] * 1000000)", "more than 100,000 values"),
    # Within the value cap, so checked here, and refused at its first bad item.
    "90,000 bad items": ("{s}.create_orders(orders=[{{}}] * 90000)", "argument 'orders.0': \"sku\" is a required"),
    "one bad item at the end": (
        "{s}.create_orders(orders=[{{'sku': 'a', 'quantity': 1}}] * 15000 + [{{'sku': 'a'}}])",
        "argument 'orders.15000': \"quantity\" is a required property",
    ),
    # Valid, and past the server's cap in bytes (4 MB for fx by default, 1 MB for fxh).
    "megabytes of valid items": (
        "{s}.create_orders(orders=[{{'sku': 'x' * 1000, 'quantity': 1}}] * 5000)",
        "the most servers.{s}.max_argument_mb lets a call send",
    ),
    # The same through proxy.call, and with its arguments spread over a loop of calls.
    "proxy.call": (
        "proxy.call('{s}', 'create_orders', {{'orders': [{{}}] * 15000}})",
        "argument 'orders.0': \"sku\" is a required",
    ),
    "a loop of large calls": (
        "for i in range(20):\n    {s}.count(items=['x'] * 99000)",
        "this run's calls passed more than 1,000,000 values in all",
    ),
}


@pytest.mark.parametrize("server", SERVERS)
@pytest.mark.parametrize("payload", PAYLOADS.values(), ids=PAYLOADS.keys())
async def test_no_run_makes_a_shared_upstream_unusable_to_others(
    shared: Shared, server: str, payload: tuple[str, str]
) -> None:
    code, says = payload
    pid = text_of(await shared.gateway.run(f"{server}.pid()"))
    result, bystander = await attack(shared.gateway.url, code.format(s=server))
    assert result.is_error and result.structured_content is not None
    assert result.structured_content["error"]["type"] == "ArgumentError", text_of(result)
    assert says.format(s=server) in text_of(result)
    await _next_client_is_served(shared, server, pid)
    assert bystander.spared(), bystander


@pytest.mark.parametrize("server", SERVERS)
async def test_a_large_valid_call_within_the_bounds_still_reaches_its_upstream(shared: Shared, server: str) -> None:
    result = await shared.gateway.run(f"{server}.create_orders(orders=[{{'sku': 'a', 'quantity': 1}}] * 15000)")
    assert result.structured_content == {"result": 15000}, text_of(result)


async def test_the_other_faces_check_what_they_send_alike(shared: Shared) -> None:
    base = shared.gateway.url.removesuffix("/mcp")
    pid = text_of(await shared.gateway.run("fx.pid()"))
    async with Client(f"{base}/mcp/direct") as direct, Client(f"{base}/mcp/inspect") as inspect:
        listed = await direct.call_tool("fx:create_orders", {"orders": [{}] * 90000})
        executed = await inspect.call_tool(
            "exec", {"server_name": "fx", "tool_name": "create_orders", "arguments": {"orders": [{}] * 90000}}
        )
        huge = await direct.call_tool("fx:count", {"items": ["x"] * 200_000})
    assert listed.is_error and "argument 'orders.0': \"sku\" is a required property" in text_of(listed)
    assert executed.is_error and "argument 'orders.0': \"sku\" is a required property" in text_of(executed)
    assert huge.is_error and "more than 100,000 values" in text_of(huge)
    await _next_client_is_served(shared, "fx", pid)


async def _run_until(shared: Shared, code: str, tag: str, *, mode: str = "auto") -> Any:
    """Run ``code`` and cancel the request (the client's notifications/cancelled) once the upstream's sleep
    tagged ``tag`` is running."""
    async with (
        Client(shared.gateway.url, mode=mode, read_timeout_seconds=60) as client,  # type: ignore[arg-type]
        anyio.create_task_group() as tg,
    ):

        async def cancel_when_started() -> None:
            await shared.started(tag)
            tg.cancel_scope.cancel()

        tg.start_soon(cancel_when_started)
        await client.call_tool("run", {"code": code})
        pytest.fail("the run ended before the client cancelled it")


async def test_a_run_past_its_deadline_cancels_its_calls_upstream(shared: Shared) -> None:
    tags = {server: f"deadline-{server}-{uuid.uuid4().hex[:8]}" for server in SLOW}
    calls = ", ".join(f"lambda: {server}.sleep(seconds=120, tag='{tag}')" for server, tag in tags.items())
    started = time.monotonic()
    result = await shared.gateway.run(f"parallel([{calls}])")
    assert result.is_error and f"run exceeded the {float(DEADLINE)} s time limit" in text_of(result)
    for tag in tags.values():
        await shared.cancelled(tag)
    assert time.monotonic() - started < 90  # told at the deadline, not when the 120 s sleeps would end


@pytest.mark.parametrize("mode", ["auto", "legacy"])
@pytest.mark.parametrize("server", SLOW)
async def test_a_run_its_client_cancels_cancels_its_calls_upstream(shared: Shared, server: str, mode: str) -> None:
    tag = f"client-{server}-{mode}-{uuid.uuid4().hex[:8]}"
    await _run_until(shared, f"{server}.sleep(seconds=60, tag='{tag}')", tag, mode=mode)
    await shared.cancelled(tag)
    pid = text_of(await shared.gateway.run(f"{server}.pid()"))
    await _next_client_is_served(shared, server, pid)


# ---- the gateway's own memory and loop (class 11) ------------------------------------------------------------


def _peak_growth_mb(pid: int) -> Callable[[], float]:
    """From now, the growth of ``pid``'s peak resident memory over its current size, in MB, when called."""
    status = Path(f"/proc/{pid}/status")

    def field(name: str) -> int:
        return next(int(line.split()[1]) for line in status.read_text().splitlines() if line.startswith(name))

    idle = field("VmRSS:")
    Path(f"/proc/{pid}/clear_refs").write_text("5")  # the peak starts again from now
    return lambda: (field("VmHWM:") - idle) / 1024


RESULTS = {
    # The third round's: 6 MB as JSON, 150 MB of objects once decoded, to show 40,000 characters of.
    "two million empty dicts": ("[{} for _ in range(2_000_000)]", 6_000_001),
    "tiny floats": ("[1.2345678901234567e-300] * 300_000", 7_200_001),
    "a long string": ("'x' * 30_000_000", 30_000_000),
}


@pytest.mark.parametrize("payload", RESULTS.values(), ids=RESULTS.keys())
async def test_a_large_result_costs_the_gateway_what_it_shows_not_what_it_was(
    shared: Shared, payload: tuple[str, int]
) -> None:
    code, length = payload
    growth = _peak_growth_mb(shared.gateway.proc.pid)
    results: list[Any] = []

    async def one() -> None:
        results.append(await shared.gateway.run(code))

    async with anyio.create_task_group() as tg:
        for _ in range(4):
            tg.start_soon(one)
    for result in results:
        assert not result.is_error, text_of(result)
        assert f"[result cut: showing 40,000 of {length:,} characters;" in text_of(result)
        assert result.structured_content is not None and result.structured_content["truncated"] is True
    # Sent whole, four such results took 150 to 300 MB of the gateway's memory at once.
    assert growth() < 64


async def test_code_past_the_node_budget_costs_its_run_little_and_says_why(shared: Shared) -> None:
    result, bystander = await attack(shared.gateway.url, "f'" + "{1}" * 33_000 + "'")
    assert result.is_error and result.structured_content is not None
    error = result.structured_content["error"]
    assert (error["type"], error["origin"]) == ("LimitError", "code")
    assert f"more than {MAX_NODES:,} syntax nodes" in error["message"]
    assert bystander.spared(), bystander
