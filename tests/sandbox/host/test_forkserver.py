"""The fork-server: one fresh forked worker per run, no process left behind, and a zygote that comes back."""

from __future__ import annotations

import os
import random
import signal
from pathlib import Path
from typing import Any

import anyio
import pytest

from sandbox import Limits, Sandbox
from sandbox.host import forkserver
from sandbox.worker.zygote import WORKER_NICE
from tests.sandbox.conftest import make_on_call


def _children(pid: int) -> dict[int, str]:
    """Child pid -> state letter (Z for a zombie), from /proc."""
    children = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            children[int(stat.parent.name)] = fields[0]
    return children


def _zygote_pid(box: Sandbox) -> int:
    process = box._forks.process
    assert process is not None and process.returncode is None
    return process.pid


async def test_burst_gets_a_fresh_worker_per_run() -> None:
    # Each run leaves the shared random generator seeded with 42: a reused worker would then draw its
    # first number after that seed, where a fresh one is reseeded at fork.
    code = "import random\nx = random.random()\nrandom.seed(42)\nx"
    results = []

    async def one() -> None:
        results.append(await box.run(code, packs={}, on_call=make_on_call()))

    async with Sandbox(Limits(timeout=20.0), warm=2) as box, anyio.create_task_group() as tg:
        for _ in range(40):
            tg.start_soon(one)
    assert all(r.ok for r in results), [r.error for r in results if not r.ok]
    assert random.Random(42).random() not in {r.value for r in results}
    assert len({r.value for r in results}) == 40


async def test_random_state_is_not_shared_between_forks(sandbox: Sandbox) -> None:
    draws = [
        (await sandbox.run("import random\nrandom.random()", packs={}, on_call=make_on_call())).value for _ in range(3)
    ]
    assert len(set(draws)) == 3


async def test_process_census_after_many_runs_and_after_exit() -> None:
    host = os.getpid()
    before = set(_children(host))
    async with Sandbox(Limits(timeout=5.0), warm=2) as box:
        for i in range(30):
            assert (await box.run(f"{i} + 1", packs={}, on_call=make_on_call())).value == i + 1
        await box.run("while True:\n    pass", packs={}, on_call=make_on_call(), limits=Limits(timeout=0.3))
        zygote = _zygote_pid(box)
        await anyio.sleep(0.3)
        # The host has one new child, the zygote; the zygote has reaped every finished worker.
        assert set(_children(host)) - before == {zygote}
        workers = _children(zygote)
        assert len(workers) <= 3 and "Z" not in workers.values(), workers
    assert set(_children(host)) - before == set()
    assert not Path(f"/proc/{zygote}").exists()
    for pid in workers:
        assert not Path(f"/proc/{pid}").exists()


async def test_the_fork_server_maps_no_library_a_worker_has_no_use_for(sandbox: Sandbox) -> None:
    # Each mapping costs every fork and every exit (about 3 us each: 0.3 ms per worker for a hundred).
    # tempfile's import of shutil once brought zlib, bz2 and lzma with their C libraries (26 mappings), and
    # dataclasses brought inspect and dis (_opcode; 1.5 MB of heap besides).
    await sandbox.run("1+1", packs={}, on_call=make_on_call())
    maps = Path(f"/proc/{_zygote_pid(sandbox)}/maps").read_text()
    libraries = {line.split()[-1].rsplit("/", 1)[-1].split(".")[0] for line in maps.splitlines() if ".so" in line}
    unused = libraries & {"zlib", "_bz2", "_lzma", "libbz2", "liblzma", "_opcode"}
    assert not unused, f"the fork-server loaded {sorted(unused)}"
    assert len(maps.splitlines()) < 170, f"{len(maps.splitlines())} mappings of {sorted(libraries)}"


async def test_the_fork_server_and_its_workers_never_preempt_the_host(sandbox: Sandbox) -> None:
    """A lower priority, and SCHED_BATCH: a worker woken for its job, an answer or its kill waits for the host's
    event loop to block rather than cutting it off (measured: the host was preempted 1.2 times per run without it,
    0.5 with it)."""
    await sandbox.run("1+1", packs={}, on_call=make_on_call())
    zygote = _zygote_pid(sandbox)
    processes = [zygote, *_children(zygote)]
    assert len(processes) >= 2, "no worker to look at"
    for pid in processes:
        assert os.sched_getscheduler(pid) == os.SCHED_BATCH, pid
        assert os.getpriority(os.PRIO_PROCESS, pid) == WORKER_NICE, pid


async def test_a_platform_that_refuses_sched_batch_still_gets_a_sandbox(monkeypatch: pytest.MonkeyPatch) -> None:
    refusing = (
        "import os\ndef _refused(*_):\n    raise PermissionError(1, 'refused')\nos.sched_setscheduler = _refused\n"
    )
    monkeypatch.setattr(forkserver, "_BOOTSTRAP", refusing + forkserver._BOOTSTRAP)
    async with Sandbox(Limits(timeout=5.0), warm=1) as box:
        assert (await box.run("1+1", packs={}, on_call=make_on_call())).value == 2
        zygote = _zygote_pid(box)
        assert os.sched_getscheduler(zygote) == os.SCHED_OTHER  # refused, as asked
        assert os.getpriority(os.PRIO_PROCESS, zygote) == WORKER_NICE


async def test_zygote_is_restarted_after_it_is_killed() -> None:
    async with Sandbox(Limits(timeout=5.0), warm=2) as box:
        assert (await box.run("1", packs={}, on_call=make_on_call())).value == 1
        first = _zygote_pid(box)
        os.kill(first, signal.SIGKILL)
        # Runs right after the kill still work: a worker lost with the zygote before any call is retried.
        with anyio.fail_after(10):
            results = [await box.run(f"{i} * 3", packs={}, on_call=make_on_call()) for i in range(5)]
        assert [r.value for r in results] == [0, 3, 6, 9, 12], [r.error for r in results]
        assert _zygote_pid(box) != first


async def test_run_when_zygote_dies_mid_run_fails_clearly() -> None:
    async with Sandbox(Limits(timeout=5.0), warm=1) as box:
        first = None

        async def kill_zygote_soon() -> None:
            await anyio.sleep(0.3)
            os.kill(_zygote_pid(box), signal.SIGKILL)

        async with anyio.create_task_group() as tg:
            await anyio.sleep(0.2)
            first = _zygote_pid(box)
            tg.start_soon(kill_zygote_soon)
            with anyio.fail_after(5):
                result = await box.run(
                    "demo.echo(1)\nwhile True:\n    pass", packs={"demo": ["echo"]}, on_call=make_on_call()
                )
        assert result.error is not None and result.error.type == "WorkerCrashed"
        assert "fork-server" in result.error.message
        assert (await box.run("2", packs={}, on_call=make_on_call())).value == 2
        assert _zygote_pid(box) != first


async def _wait_for_new_zygote(box: Sandbox, old: int) -> int:
    """The pid of the zygote that took over from `old` (a fresh one starts in the background)."""
    with anyio.fail_after(20):
        while (pid := _zygote_pid(box)) == old:
            await anyio.sleep(0.05)
    return pid


async def test_the_zygote_is_replaced_every_few_forks_and_when_idle(monkeypatch: pytest.MonkeyPatch) -> None:
    """A run must not learn from addresses, the heap's layout or hash values what other runs did: every
    RECYCLE_FORKS forks and after RECYCLE_IDLE seconds without one, workers come from a fresh zygote (a new
    process: a new hash seed and address-space layout); the old one exits once its last worker has."""
    monkeypatch.setattr(forkserver, "RECYCLE_FORKS", 4)
    monkeypatch.setattr(forkserver, "RECYCLE_IDLE", 1.5)

    async def hashed() -> int:
        result = await box.run("hash('same text')", packs={}, on_call=make_on_call())
        assert result.ok, result.error
        return int(result.value)

    async with Sandbox(Limits(timeout=5.0), warm=1) as box:
        seen = {await hashed()}
        first = _zygote_pid(box)
        assert await hashed() in seen  # workers of one zygote share its seed
        for _ in range(4):
            await hashed()
        second = await _wait_for_new_zygote(box, first)
        for _ in range(3):  # the warm worker the old zygote forked, then workers of the new one
            seen.add(await hashed())
        assert len(seen) == 2, "the fresh zygote has the same hash seed"
        with anyio.fail_after(10):
            while Path(f"/proc/{first}").exists():
                await anyio.sleep(0.05)
        host_children = set(_children(os.getpid()))
        assert first not in host_children and second in host_children
        # Idle: no fork for RECYCLE_IDLE seconds.
        third = await _wait_for_new_zygote(box, second)
        await hashed()  # the warm worker of the second zygote
        assert await hashed() not in seen
        assert third != first


async def test_a_worker_forked_before_a_run_ends_sees_nothing_of_it() -> None:
    """Run N leaves a global, a seeded generator and output behind, then waits on a pack call; run N+1 goes to a
    worker forked before N ended (one the pool had ready), and so does the run after N: none sees any of it."""
    leave = "import random\nleak = 'run N'\nrandom.seed(42)\nprint('from run N')\ndemo.echo('wait')"
    look = (
        "import random\ntry:\n    seen = leak\nexcept NameError:\n    seen = None\n"
        "demo.echo(seen)\n[seen, random.random()]"
    )
    release = anyio.Event()
    blocked = anyio.Event()
    ready_while_blocked: set[forkserver.Worker] = set()
    used: list[forkserver.Worker] = []
    echo = make_on_call()

    async with Sandbox(Limits(timeout=10.0), warm=2) as box:
        await anyio.sleep(0.5)  # both pool workers forked and ready

        async def on_call(pack: str, tool: str, args: list[Any], kwargs: dict[str, Any]) -> Any:
            if args == ["wait"]:
                ready_while_blocked.update(w for w in box._live if not w.taken)
                blocked.set()
                await release.wait()
            else:
                # A finished run's worker stays live (and taken) until the aftercare kills it.
                (mine,) = (w for w in box._live if w.taken and w is not first_worker and w not in used)
                used.append(mine)
            return await echo(pack, tool, args, kwargs)

        results: dict[str, Any] = {}

        async def run_n() -> None:
            results["N"] = await box.run(leave, packs={"demo": ["echo"]}, on_call=on_call)

        async with anyio.create_task_group() as tg:
            tg.start_soon(run_n)
            with anyio.fail_after(10):
                await blocked.wait()
            (first_worker,) = (w for w in box._live if w.taken)
            results["N+1"] = await box.run(look, packs={"demo": ["echo"]}, on_call=on_call)
            release.set()
        results["N+2"] = await box.run(look, packs={"demo": ["echo"]}, on_call=on_call)

    assert results["N"].ok and results["N"].output == "from run N\n", results["N"].error
    seeded = random.Random(42).random()
    for name in ("N+1", "N+2"):
        assert results[name].ok, results[name].error
        seen, drawn = results[name].value
        assert seen is None and drawn != seeded and results[name].output == ""
    assert used[0] in ready_while_blocked, "run N+1 did not get a worker forked before run N ended"


_WARM_UP_NAMES = ("f", "i", "x", "p")
"""The names the warm-up job (which the fork-server itself runs before forking) defines."""


@pytest.mark.parametrize("warm", [0, 1], ids=["forked-on-demand", "from-the-pool"])
async def test_the_fork_servers_warm_up_leaves_nothing_to_a_snippet(warm: int) -> None:
    """The fork-server runs the warm-up job itself before it forks (sandbox.worker._process.warm_up): a worker
    forked on demand (no prefault job of its own) and a pool worker see none of its names or output."""
    probe = "try:\n    {0}\n    found.append({0!r})\nexcept NameError:\n    pass\n"
    probes = "".join(probe.format(name) for name in _WARM_UP_NAMES)
    async with Sandbox(Limits(timeout=10.0), warm=warm) as box:
        await anyio.sleep(0.3)
        result = await box.run(f"found = []\n{probes}found", packs={}, on_call=make_on_call())
    assert result.ok and result.value == [] and result.output == "", (result.error, result.value, result.output)
