"""The first look sees every server: liveness and initialize answer at once whatever the upstreams do, while what
shows or resolves the catalogue waits for every server's first connection attempt, bounded by startup_wait; past
it, a run waits for a server still connecting and clients hear tools/list_changed as it comes up; /ready names the
servers still on their first attempt; the whole first wave is one list_changed."""

from __future__ import annotations

import json
import subprocess
import time
import urllib.request
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, StdioServerParameters, types

from tests.conftest import FIXTURES, PYTHON, TIME_SERVER
from tests.eras import era_clients
from tests.gateways import ONETOOL, get, origin, start_http_gateway, stop, text_of, until, write_config
from tests.stubs.test_stubs import classes_of

pytestmark = pytest.mark.anyio

HANGS = {"command": PYTHON, "args": [str(FIXTURES / "fault_server.py"), "hang"], "connect_timeout": 120}
"""Never answers initialize: were the front to wait for it, nothing would answer for two minutes."""
QUICK = {
    "fx": {"command": PYTHON, "args": [str(FIXTURES / "fault_server.py"), "ok"]},
    "time": {"command": TIME_SERVER, "args": ["--local-timezone", "UTC"]},
}
"""Two servers that connect in about a second: well after a client's initialize is answered."""
STARTUP_WAIT = 10
"""Long enough for a quick server on a loaded machine, far shorter than the hung server's connect timeout."""


def released_by(flag: Path) -> dict[str, Any]:
    """The fault fixture behind a shell that starts it only once ``flag`` exists (or after 30 s): a server whose
    connect the test decides."""
    wait = f'i=0; while [ ! -e "{flag}" ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i+1)); done'
    return {
        "command": "sh",
        "args": ["-c", f'{wait}; exec "{PYTHON}" "{FIXTURES / "fault_server.py"}" ok'],
        "connect_timeout": 60,
    }


def stdio_gateway(tmp_path: Path, config: dict[str, Any]) -> StdioServerParameters:
    path = write_config(tmp_path, config)
    log = str(tmp_path / "gateway.log")
    return StdioServerParameters(command=ONETOOL, args=["serve", "--config", str(path), "--log-file", log])


def fetch_text(url: str, path: str) -> str:
    with urllib.request.urlopen(origin(url) + path, timeout=60) as response:
        return str(response.read().decode())


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_a_stdio_client_that_lists_once_after_initialize_sees_every_quick_server(
    tmp_path: Path, mode: str
) -> None:
    async with Client(stdio_gateway(tmp_path, {"servers": QUICK}), mode=mode, read_timeout_seconds=60) as client:  # type: ignore[arg-type]
        description = (await client.list_tools()).tools[0].description or ""
    assert "connecting" not in description
    assert "\n  echo(message" in description and "\n  get_current_time(" in description


async def test_a_server_hung_in_initialize_delays_the_first_list_by_startup_wait_at_most(tmp_path: Path) -> None:
    config = {"servers": {"fx": QUICK["fx"], "hangs": HANGS}, "startup_wait": STARTUP_WAIT}
    params = stdio_gateway(tmp_path, config)
    with anyio.fail_after(60):  # bounded by startup_wait; waiting for the hung server would take 120 s
        async with Client(params, read_timeout_seconds=60) as client:
            description = (await client.list_tools()).tools[0].description or ""
            assert "hangs: [server connecting]" in description
            assert "\n  echo(message" in description
            assert text_of(await client.call_tool("run", {"code": "1 + 1"})) == "2"


async def test_over_http_a_hung_server_keeps_neither_health_nor_a_run_waiting(tmp_path: Path) -> None:
    """Past startup_wait the gateway serves what it has; ``http.ready_requires_servers`` still holds /ready for a
    required server that is not connected."""
    config = {"servers": {"hangs": HANGS}, "startup_wait": STARTUP_WAIT, "http": {"ready_requires_servers": ["hangs"]}}
    # The URL line is printed (within start_and_read_line's deadline) while the upstream hangs.
    served = start_http_gateway(tmp_path, config, f"hang-{uuid.uuid4().hex}", settle=False)
    try:
        assert get(served.url, "/health") == (
            200,
            {"status": "ok", "servers": {"connecting": 1}, "store": "ok", "draining": False},
        )
        with anyio.fail_after(60):
            assert text_of(await served.run("1 + 1", mode="legacy")) == "2"
        not_ready = {"ready": False, "not_ready": [{"name": "hangs", "status": "connecting"}]}
        assert get(served.url, "/ready") == (503, not_ready)
    finally:
        assert stop(served.proc) == 0


async def test_every_face_waits_for_the_first_wave_and_hears_it_as_one_list_changed(tmp_path: Path) -> None:
    flag = tmp_path / "release"
    http = {"enable_inspect_endpoint": True, "enable_direct_endpoint": True}
    config = {"servers": {"fx": QUICK["fx"], "late": released_by(flag)}, "http": http, "startup_wait": 60}
    served = start_http_gateway(tmp_path, config, f"wave-{uuid.uuid4().hex}", settle=False)
    url = served.url
    try:
        # Liveness at once; readiness names the server on its first attempt.
        assert get(url, "/health")[0] == 200
        status, body = get(url, "/ready")
        assert status == 503 and {"name": "late", "status": "connecting"} in body["not_ready"]
        async with (
            era_clients(url) as clients,  # initialize answered while the catalogue waits
            Client(url + "/inspect", read_timeout_seconds=60) as inspect,
            Client(url + "/direct", mode="legacy", read_timeout_seconds=60) as direct,
        ):
            answers: dict[str, Any] = {}

            def answer(name: str, ask: Callable[[], Awaitable[Any]]) -> Callable[[], Awaitable[None]]:
                async def task() -> None:
                    answers[name] = await ask()

                return task

            async def described(client: Client) -> str:
                return (await client.list_tools()).tools[0].description or ""

            async def names(client: Client) -> list[str]:
                return [t.name for t in (await client.list_tools()).tools]

            async def call(client: Client, tool: str, arguments: dict[str, Any]) -> str:
                return text_of(await client.call_tool(tool, arguments))

            exec_args = {"server_name": "late", "tool_name": "echo", "arguments": {"message": "hi"}}
            asks: dict[str, Callable[[], Awaitable[Any]]] = {
                "legacy": lambda: described(clients.legacy),
                "modern": lambda: described(clients.modern),
                "inspect": lambda: described(inspect),
                "direct": lambda: names(direct),
                "exec": lambda: call(inspect, "exec", exec_args),
                "direct call": lambda: call(direct, "late:echo", {"message": "hi"}),
                # Prompts and resources are shown from the same catalogue, so they wait for the same wave.
                "prompts": lambda: clients.modern.list_prompts(),
                "resources": lambda: direct.list_resources(),
                "run": lambda: call(clients.legacy, "run", {"code": "[s['status'] for s in proxy.list_servers()]"}),
                "tools.py": lambda: anyio.to_thread.run_sync(fetch_text, url, "/runtime/tools.py"),
                "status": lambda: anyio.to_thread.run_sync(get, url, "/status"),
            }
            async with anyio.create_task_group() as tg:
                for name, ask in asks.items():
                    tg.start_soon(answer(name, ask))
                await anyio.sleep(1)  # time enough to answer, were they not waiting for `late`
                assert answers == {}, "the catalogue was shown before the first wave was over"
                assert get(url, "/health")[0] == 200  # liveness still answers at once
                flag.touch()
            for era in ("legacy", "modern"):
                assert "\nlate:\n" in answers[era] and "\nfx:\n" in answers[era], answers[era]
            assert "Server: late - " in answers["inspect"] and "Server: fx - " in answers["inspect"]
            assert {"late:echo", "fx:echo"} <= set(answers["direct"])
            assert (answers["exec"], answers["direct call"]) == ('"echo: hi"', "echo: hi")  # TOON quotes it
            assert answers["run"] == '["connected","connected"]'
            assert answers["prompts"].prompts == [] and answers["resources"].resources == []  # fx lists none
            assert {"Late", "Fx"} <= set(classes_of(answers["tools.py"]))
            assert {s["name"]: s["tool_count"] > 0 for s in answers["status"][1]["servers"]} == {
                "late": True,
                "fx": True,
            }
            assert get(url, "/ready")[0] == 200
            # The wave was one list_changed for each era; a later change is one more.
            later = time.perf_counter()
            await served.run("fx.add_tool(name='marker')")
            heard = {era: [await one.next(), await one.next()] for era, one in clients.heard.items()}
            assert all(first < later <= second for first, second in heard.values()), heard
    finally:
        assert stop(served.proc) == 0


async def test_past_startup_wait_a_run_waits_for_a_server_still_connecting_and_clients_hear_it_come_up(
    tmp_path: Path,
) -> None:
    flag = tmp_path / "release"
    http = {"ready_requires_servers": ["late"], "enable_inspect_endpoint": True, "enable_direct_endpoint": True}
    config = {"servers": {"late": released_by(flag)}, "http": http, "startup_wait": 0}
    served = start_http_gateway(tmp_path, config, f"late-{uuid.uuid4().hex}", settle=False)
    try:
        assert get(served.url, "/ready")[0] == 503
        async with (
            era_clients(served.url) as clients,
            Client(served.url + "/inspect", read_timeout_seconds=60) as inspect,
            Client(served.url + "/direct", read_timeout_seconds=60) as direct,
        ):
            before = (await clients.modern.list_tools()).tools[0].description or ""
            assert "late: [server connecting]" in before and "  echo(" not in before
            clients.drain()
            results: list[types.CallToolResult] = []
            async with anyio.create_task_group() as tg:

                async def run() -> None:
                    results.append(await clients.legacy.call_tool("run", {"code": "late.echo(message='hi')"}))

                async def exec_() -> None:  # the other faces' calls wait the same way
                    arguments = {"server_name": "late", "tool_name": "echo", "arguments": {"message": "hi"}}
                    results.append(await inspect.call_tool("exec", arguments))

                async def direct_call() -> None:
                    results.append(await direct.call_tool("late:echo", {"message": "hi"}))

                tg.start_soon(run)
                tg.start_soon(exec_)
                tg.start_soon(direct_call)
                await anyio.sleep(2.5)  # the server comes up 2-3 s after start, while the calls wait for it
                assert results == [], "a call ended before its server could connect"
                flag.touch()
            assert [r.is_error for r in results] == [False, False, False]
            assert all("echo: hi" in text_of(r) for r in results)
            await clients.both_heard()  # each era heard tools/list_changed when the server came up
            for client in (clients.legacy, clients.modern):
                after = (await client.list_tools()).tools[0].description or ""
                assert "\nlate:\n" in after and "\n  echo(message" in after
        assert until(lambda: get(served.url, "/ready")[0] == 200)
    finally:
        assert stop(served.proc) == 0


_RUN_STDIO_STACK = """
import json, sys
import anyio
import onetool.serve.app  # every face's module, as `onetool serve` loads them
from onetool.config import load_config
from onetool.core.gateway import Gateway

async def main():
    async with Gateway(load_config(sys.argv[1])) as gw:
        result = await gw.run("fx.echo(message='hi')")
    heavy = ("jinja2", "RestrictedPython", "alembic", "sandbox.worker.policy")
    print(json.dumps({"ok": not result.is_error, "loaded": sorted(m for m in heavy if m in sys.modules)}))

anyio.run(main)
"""


def test_a_gateway_without_a_console_loads_neither_its_templates_nor_the_language_layer(tmp_path: Path) -> None:
    """Memory a gateway never uses: Jinja2 loads with the /ui console only, RestrictedPython in the fork-server
    only (the run description lists the allowed modules from their names), Alembic only to migrate a store."""
    config = write_config(
        tmp_path, {"servers": {"fx": {"command": PYTHON, "args": [str(FIXTURES / "fault_server.py"), "ok"]}}}
    )
    done = subprocess.run([PYTHON, "-c", _RUN_STDIO_STACK, str(config)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"ok": True, "loaded": []}, done.stderr
