"""Serve at once: the front answers while upstreams still connect; a run waits for a server that is still
connecting; clients hear tools/list_changed as servers come up; /ready waits for the servers it requires."""

from __future__ import annotations

import json
import subprocess
import uuid
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, StdioServerParameters, types

from tests.conftest import FIXTURES, PYTHON
from tests.eras import era_clients
from tests.gateways import ONETOOL, get, start_http_gateway, stop, text_of, until, write_config

pytestmark = pytest.mark.anyio

HANGS = {"command": PYTHON, "args": [str(FIXTURES / "fault_server.py"), "hang"], "connect_timeout": 120}
"""Never answers initialize: were the front to wait for it, nothing would answer for two minutes."""


def released_by(flag: Path) -> dict[str, Any]:
    """The fault fixture behind a shell that starts it only once ``flag`` exists (or after 30 s): a server whose
    connect the test decides."""
    wait = f'i=0; while [ ! -e "{flag}" ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i+1)); done'
    return {
        "command": "sh",
        "args": ["-c", f'{wait}; exec "{PYTHON}" "{FIXTURES / "fault_server.py"}" ok'],
        "connect_timeout": 60,
    }


async def test_http_answers_while_an_upstream_hangs_in_initialize(tmp_path: Path) -> None:
    config = {"servers": {"hangs": HANGS}, "http": {"ready_requires_servers": ["hangs"]}}
    # The URL line is printed (within start_and_read_line's deadline) while the upstream hangs.
    served = start_http_gateway(tmp_path, config, f"hang-{uuid.uuid4().hex}", settle=False)
    try:
        assert get(served.url, "/health") == (
            200,
            {"status": "ok", "servers": {"connecting": 1}, "store": "ok", "draining": False},
        )
        not_ready = {"ready": False, "not_ready": [{"name": "hangs", "status": "connecting"}]}
        assert get(served.url, "/ready") == (503, not_ready)
        assert text_of(await served.run("1 + 1")) == "2"
    finally:
        assert stop(served.proc) == 0


async def test_stdio_answers_while_an_upstream_hangs_in_initialize(tmp_path: Path) -> None:
    config = write_config(tmp_path, {"servers": {"hangs": HANGS}})
    log = str(tmp_path / "gateway.log")
    params = StdioServerParameters(command=ONETOOL, args=["serve", "--config", str(config), "--log-file", log])
    with anyio.fail_after(30):  # bounded; a front that waited for the upstream would take 120 s
        async with Client(params, read_timeout_seconds=30) as client:
            description = (await client.list_tools()).tools[0].description or ""
            assert "hangs: [server connecting]" in description
            assert text_of(await client.call_tool("run", {"code": "1 + 1"})) == "2"


async def test_a_run_waits_for_a_server_still_connecting_and_clients_hear_it_come_up(tmp_path: Path) -> None:
    flag = tmp_path / "release"
    http = {"ready_requires_servers": ["late"], "enable_inspect_endpoint": True, "enable_direct_endpoint": True}
    config = {"servers": {"late": released_by(flag)}, "http": http}
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
            await clients.delays(0)  # each era heard tools/list_changed when the server came up
            for client in (clients.legacy, clients.modern):
                after = (await client.list_tools()).tools[0].description or ""
                assert "\nlate:\n" in after and "\n  echo(message: str)" in after
        assert until(lambda: get(served.url, "/ready")[0] == 200)
    finally:
        assert stop(served.proc) == 0


_RUN_STDIO_STACK = """
import json, sys
import anyio
import onetool.serve.app  # every face's module, as `onetool serve` loads them
from onetool.config import load_config
from onetool.gateway import Gateway

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
