"""A hung upstream costs only the runs that call it, and a run that finds its server down reconnects it at once."""

from __future__ import annotations

import os
import signal
from contextlib import suppress
from functools import partial

import anyio
import pytest
from mcp import types

from onetool.config import Config
from onetool.core import gateway as gateway_module
from onetool.core.gateway import Gateway
from onetool.upstream import UpstreamPool
from onetool.upstream.connection import REVIVE_GAP
from tests.conftest import FIXTURES, PYTHON
from tests.gateways import text_of
from tests.upstream.conftest import FaultHttpServer

STUCK = 8


def _config() -> Config:
    fault = {"command": PYTHON, "args": [str(FIXTURES / "fault_server.py"), "ok"]}
    return Config.model_validate(
        {
            "servers": {"fx": fault, "other": fault},
            # Two CPU slots for eight stuck runs: only lent slots let anything else start.
            "sandbox": {"timeout": 60, "max_concurrent_runs": 2, "max_workers": STUCK + 4},
        }
    )


async def test_runs_stuck_on_a_stopped_upstream_leave_other_runs_free() -> None:
    async with Gateway(_config()) as gw:
        pid = int(text_of(await gw.run("fx.pid()")))
        os.kill(pid, signal.SIGSTOP)
        try:
            stuck: list[types.CallToolResult] = []

            async def stuck_run() -> None:
                stuck.append(await gw.run("fx.echo(message='stuck')"))

            async with anyio.create_task_group() as tg:
                for _ in range(STUCK):
                    tg.start_soon(stuck_run)
                with anyio.fail_after(30):
                    while gw.pool.server_status("fx").calls_in_flight < STUCK:
                        await anyio.sleep(0.02)

                others = [await gw.run("1 + 1") for _ in range(3)]
                others += [await gw.run("other.echo(message='hi')") for _ in range(3)]
                assert [text_of(r) for r in others] == ["2"] * 3 + ["echo: hi"] * 3

                # They started and finished while every stuck run still held its call.
                assert not stuck and gw.pool.server_status("fx").calls_in_flight == STUCK
                os.kill(pid, signal.SIGCONT)
        finally:
            with suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)
        assert [text_of(r) for r in stuck] == ["echo: stuck"] * STUCK


async def test_a_run_calling_a_disconnected_server_reconnects_it_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    # A background backoff far longer than the test: only the run itself can bring the server back in time.
    monkeypatch.setattr(gateway_module, "UpstreamPool", partial(UpstreamPool, backoff_base=60))
    with FaultHttpServer() as server:
        fx = {"url": server.url, "connect_timeout": 5, "max_backoff": 120}
        async with Gateway(Config.model_validate({"servers": {"fx": fx}})) as gw:
            server.kill()
            down = await gw.run("fx.echo(message='down')")
            assert down.is_error and "server 'fx' is unavailable" in text_of(down)
            server.start()
            await anyio.sleep(REVIVE_GAP)
            status = gw.registry.server_status("fx")
            assert status is not None and not status.connected
            assert text_of(await gw.run("fx.echo(message='back')")) == "echo: back"
