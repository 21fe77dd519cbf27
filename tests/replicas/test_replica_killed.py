"""kill -9 of one replica while the other serves, a run of its own in flight: every process the dead one started
ends, the other serves on and writes the shared store at once (the dead one's connections hold no lock), and the
dead one, started again, begins from the store: what changed meanwhile included."""

from __future__ import annotations

import contextlib
import os
import uuid
from pathlib import Path

import anyio
import pytest
import yaml

from tests.admin_api import admin
from tests.eras import era_clients
from tests.gateways import ServedGateway, start_http_gateway, stop, until
from tests.postgres import create_database
from tests.replicas.conftest import TOKEN, fx_spec, replicas
from tests.replicas.test_one_truth import echo, until_b

pytestmark = pytest.mark.anyio


def descendants(pid: int) -> set[int]:
    """Every live process under ``pid``: a gateway's fork-server and workers, its warden, its upstreams."""
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            parents[int(entry)] = int(stat.rsplit(")", 1)[1].split()[1])
    found, frontier = set(), {pid}
    while frontier:
        frontier = {child for child, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return found


def _command(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def alive(pids: set[int]) -> set[int]:
    """Those of ``pids`` still running (a zombie has ended: only its parent's reaping is left)."""
    running = set()
    for pid in pids:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state != "Z":
            running.add(pid)
    return running


async def test_a_replica_killed_mid_run_leaves_nothing_behind_and_the_other_serves_on(
    postgres: str, tmp_path: Path
) -> None:
    state = create_database(postgres, f"killed_{uuid.uuid4().hex[:12]}")
    with replicas(tmp_path, state) as (a, b):
        assert await a.served.run("fx.echo(message='warm')")  # its sandbox and upstream are up
        started = descendants(a.served.proc.pid)
        commands = [_command(pid) for pid in started]
        assert any(b"fault_server.py" in c for c in commands), commands  # its upstream
        assert any(b"sandbox.worker.zygote" in c for c in commands), commands  # its fork-server

        async with anyio.create_task_group() as tg:
            # A dies in the middle of a run that waits on its upstream.
            tg.start_soon(_run_ignoring_its_end, a.served, "fx.sleep(seconds=30)")
            await anyio.sleep(1.0)
            a.served.proc.kill()
            a.served.proc.wait(10)
            tg.cancel_scope.cancel()  # its client's fate is not the point
        until(lambda: not alive(started), timeout=15)

        async with era_clients(b.url) as clients:
            assert await echo(clients) == (False, "echo: hi")
            status, body = b.admin("POST", "/admin/servers", {"name": "fx2", "spec": fx_spec()})
            assert status == 201, body
            await until_b(lambda: (b.server("fx2") or {}).get("status") == "connected")
            assert await echo(clients, "fx2") == (False, "echo: hi")

        folder = tmp_path / "A"
        config = yaml.safe_load((folder / "onetool.yaml").read_text())
        env = {"ONETOOL_RUNTIME_DIR": str(folder / "run"), "ONETOOL_STATE_DIR": str(folder / "state")}
        again = start_http_gateway(folder, config, f"replica-A2-{uuid.uuid4().hex}", env=env)
        try:
            status, view = admin(again.url, "GET", "/admin/servers/fx2", token=TOKEN)
            assert status == 200, view
            await until_b(
                lambda: admin(again.url, "GET", "/admin/servers/fx2", token=TOKEN)[1]["status"] == "connected"
            )
            ran = await again.run("fx2.echo(message='back')")
            assert not ran.is_error and ran.structured_content == {"result": "echo: back"}
        finally:
            assert stop(again.proc) == 0


async def _run_ignoring_its_end(served: ServedGateway, code: str) -> None:
    """A run whose gateway is killed under it: whatever its client makes of the dropped connection."""
    with contextlib.suppress(Exception):
        await served.run(code)
