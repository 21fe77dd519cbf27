"""The host side: an async Sandbox that runs each snippet in its own fresh, confined worker.

Workers are forked by a fork-server (sandbox/worker/zygote.py), which the host starts once and restarts
should it die; the host keeps `warm` forked, already confined workers ready, so a run only sends its
job. Only JSON crosses between processes, never pickle.
"""

from __future__ import annotations

import math
import os
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

import anyio
import anyio.lowlevel
from anyio.abc import TaskGroup
from anyio.streams.memory import MemoryObjectSendStream

from sandbox.host._run import Run
from sandbox.host._seccomp import compile_filter
from sandbox.host._slots import Busy, Seat, Slots
from sandbox.host._untrusted import decode_untrusted
from sandbox.host.budget import HostMemory
from sandbox.host.forkserver import GONE, START_TIMEOUT, STOP_TIMEOUT, ForkServer, SpawnFailure, Worker
from sandbox.protocol.api import Limits, OnCall, OnProgress, OnSites, RunResult
from sandbox.protocol.channel import ProtocolError
from sandbox.protocol.messages import is_ready, job_frame
from sandbox.protocol.verdicts import Verdict

__all__ = ["Sandbox", "SandboxLoad"]

_READY_CAP = 64
AFTER_RUN_GRACE = 0.003
"""Seconds a finished worker is left to wait for its kill, and its replacement to be forked, so that this CPU
work (a millisecond or more of process teardown and copy-on-write faults) does not compete with the caller
answering its client. The next run to start cuts the wait short: under load, workers are wanted at once."""


WORKERS_PER_SLOT = 4
"""Default workers per CPU slot: runs waiting on upstreams hold a worker but lend their CPU slot
(sandbox/host/_slots.py)."""


def _confinement(limits: Limits) -> tuple[int, float]:
    """The limits a worker is confined with while idle, before its job arrives; other limits need their own fork."""
    return limits.memory_mb, limits.cpu_seconds or limits.timeout


@dataclass(frozen=True)
class SandboxLoad:
    """What the sandbox is doing now, for an operator's metrics."""

    computing: int
    """Runs holding a CPU slot, of ``max_concurrent_runs``."""
    holding_workers: int
    """Runs holding a worker (computing or waiting on pack calls), of ``max_workers``."""
    waiting: int
    """Runs waiting in line for a slot (the run queue)."""
    processes: int
    """Worker processes alive: those of runs, and warm ones ready for the next run."""
    max_concurrent_runs: int
    max_workers: int


class Sandbox:
    """Runs snippets, one fresh confined worker process per run, with `warm` workers kept ready.

    At most `max_concurrent_runs` runs (default: twice the CPU count) compute at once, and at most
    `max_workers` (default: four times that) hold a worker of up to memory_mb, computing or waiting on pack
    calls (sandbox/host/_slots.py); more wait for slots in arrival order. One that waits longer than `queue_timeout`
    seconds (default: its own `timeout`) is not started and ends with a BusyError; its timeout is counted
    only once it runs. What runs' data may take of the host's memory at once is `host_memory_mb`
    (sandbox/host/budget.py).
    """

    def __init__(
        self,
        limits: Limits = Limits(),  # noqa: B008 (frozen, immutable)
        *,
        warm: int = 2,
        max_concurrent_runs: int | None = None,
        max_workers: int | None = None,
        queue_timeout: float | None = None,
        host_memory_mb: int = 256,
    ) -> None:
        if max_concurrent_runs is not None and max_concurrent_runs < 1:
            raise ValueError(f"sandbox.max_concurrent_runs must be at least 1, not {max_concurrent_runs}")
        self.limits = limits
        self.max_concurrent_runs = max_concurrent_runs or 2 * (os.cpu_count() or 1)
        self.max_workers = max_workers or WORKERS_PER_SLOT * self.max_concurrent_runs
        if self.max_workers < self.max_concurrent_runs:
            raise ValueError(
                f"sandbox.max_workers ({self.max_workers}) must be at least sandbox.max_concurrent_runs "
                f"({self.max_concurrent_runs}): every run computing holds a worker"
            )
        self.queue_timeout = queue_timeout
        self._slots = Slots(self.max_concurrent_runs, self.max_workers)
        self._memory = HostMemory(host_memory_mb * 1024 * 1024)
        self._warm = max(0, warm)
        self._forks = ForkServer(compile_filter().hex())
        self._pool_key = _confinement(limits)
        self._task_group: TaskGroup | None = None
        self._ready_send, self._ready_receive = anyio.create_memory_object_stream[Worker | SpawnFailure](math.inf)
        self._live: set[Worker] = set()
        self._closing = False
        self._refills = 0
        self._finished: list[Worker] = []
        self._aftercare_wanted = anyio.Event()
        self._hurry = anyio.Event()

    def load(self) -> SandboxLoad:
        computing, holding, waiting = self._slots.taken()
        return SandboxLoad(computing, holding, waiting, len(self._live), self.max_concurrent_runs, self.max_workers)

    async def __aenter__(self) -> Sandbox:
        task_group = anyio.create_task_group()
        await task_group.__aenter__()
        self._task_group = task_group
        task_group.start_soon(self._forks.run)
        task_group.start_soon(self._aftercare)
        for _ in range(self._warm):
            task_group.start_soon(self._own_worker, self._ready_send, self._pool_key)
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._task_group is not None
        self._closing = True
        self._aftercare_wanted.set()
        self._hurry.set()
        for worker in list(self._live):
            worker.discard()
        await self._forks.stop()
        try:
            await self._task_group.__aexit__(None, None, None)
        finally:
            self._task_group = None
            self._ready_send.close()
            self._ready_receive.close()

    async def _aftercare(self) -> None:
        """After runs: kill the workers that finished cleanly and fork replacements for the pool workers taken
        (`_after_run`), a grace period later; starting a task alone costs a run a few hundred microseconds it
        should not wait for."""
        while True:
            await self._aftercare_wanted.wait()
            self._aftercare_wanted, self._hurry = anyio.Event(), anyio.Event()
            with anyio.move_on_after(AFTER_RUN_GRACE):
                await self._hurry.wait()
            if self._closing or self._task_group is None:
                return
            finished, self._finished = self._finished, []
            for worker in finished:
                worker.discard()
            count, self._refills = self._refills, 0
            for _ in range(count):
                self._task_group.start_soon(self._own_worker, self._ready_send, self._pool_key)

    def _after_run(self, worker: Worker | None, replace: bool) -> None:
        """Leave `worker` (one that finished cleanly and now only waits to be killed) and, if `replace`, the
        replacement of the pool worker the run took, to the aftercare."""
        if worker is None and not replace:
            return  # nothing to do: no wake-up and grace period for it
        if worker is not None:
            self._finished.append(worker)
        if replace:
            self._refills += 1
        self._aftercare_wanted.set()

    async def _own_worker(
        self, deliver: MemoryObjectSendStream[Worker | SpawnFailure], key: tuple[int, float], prefault: bool = True
    ) -> None:
        """One worker's whole life, fork to exit: it is always killed, its exit awaited and its channel closed.

        A worker lost with the zygote before it was ready is replaced, once the zygote is back. One forked
        without `prefault` is wanted at once: it says ready without taking its page faults first.
        """
        while True:
            item = await self._forks.fork(*key, prefault=prefault)
            if isinstance(item, SpawnFailure):
                self._offer(deliver, item)
                return
            worker = item
            self._live.add(worker)
            try:
                if await self._greet(worker, deliver):
                    await worker.wait()
                    return
            finally:
                if not worker.taken:  # else the run that took it discards it once it has read all it sent
                    worker.discard()
                with anyio.CancelScope(shield=True), anyio.move_on_after(STOP_TIMEOUT):
                    await worker.wait()
                self._live.discard(worker)
            if not worker.lost or self._closing:
                self._offer(
                    deliver, SpawnFailure(f"a sandbox worker failed to start (exit status {worker.returncode})")
                )
                return

    async def _greet(self, worker: Worker, deliver: MemoryObjectSendStream[Worker | SpawnFailure]) -> bool:
        """Whether the worker said ready and was handed on."""
        if self._closing:
            return False
        ready: Any = None
        with anyio.move_on_after(START_TIMEOUT):
            try:
                ready = decode_untrusted(await worker.channel.receive_frame(_READY_CAP))
            except (*GONE, ProtocolError):
                pass
        if is_ready(ready):
            if not self._offer(deliver, worker):
                worker.discard()
            return True
        return False

    def _offer(self, deliver: MemoryObjectSendStream[Worker | SpawnFailure], item: Worker | SpawnFailure) -> bool:
        if self._closing:
            return False
        try:
            deliver.send_nowait(item)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, anyio.WouldBlock):
            return False  # the run that asked for this worker was cancelled
        return True

    async def _acquire(self, key: tuple[int, float]) -> tuple[Worker | SpawnFailure, bool]:
        """A ready worker, and whether its replacement is still to be started.

        Each pool worker taken is replaced. With one ready the replacement waits until the run is over, so
        the fork never lands on a run's critical path; with none ready it starts at once, without the prefault
        job, so a burst forks as many workers as it needs and none waits for work the run would do itself. A run
        with other confinement limits gets a worker of its own, also without it.
        """
        if self._task_group is None or self._closing:
            raise RuntimeError("Sandbox.run() needs an entered sandbox: `async with Sandbox() as sandbox:`")
        self._hurry.set()
        if key != self._pool_key:
            deliver, receive = anyio.create_memory_object_stream[Worker | SpawnFailure](1)
            with deliver, receive:
                self._task_group.start_soon(self._own_worker, deliver, key, False)
                return await receive.receive(), False
        while True:
            deferred = self._ready_receive.statistics().current_buffer_used > 0
            if not deferred:
                self._task_group.start_soon(self._own_worker, self._ready_send, key, False)
            try:
                # A ready worker is taken at once: no trip round the event loop on a run's critical path.
                await anyio.lowlevel.checkpoint_if_cancelled()
                item = self._ready_receive.receive_nowait()
            except anyio.WouldBlock:
                item = await self._ready_receive.receive()
            if isinstance(item, SpawnFailure) or item.running:
                return item, deferred
            if deferred:
                self._task_group.start_soon(self._own_worker, self._ready_send, key)

    async def run(
        self,
        code: str,
        *,
        packs: Mapping[str, Collection[str]],
        on_call: OnCall,
        on_progress: OnProgress | None = None,
        on_sites: OnSites | None = None,
        limits: Limits | None = None,
    ) -> RunResult:
        """Run one snippet. Never raises for anything the snippet does: that ends up in RunResult.error.
        `on_progress` gets the snippet's progress() reports; without it they are dropped. `on_sites` checks
        the pack calls the source shows before the snippet starts (the worker parses it, not the host)."""
        limits = limits or self.limits
        frame = job_frame(code, packs, limits)
        wait = float(limits.timeout if self.queue_timeout is None else self.queue_timeout)
        try:
            seat = await self._slots.take(wait)
        except Busy as busy:
            doing = "running" if busy.key == "sandbox.max_concurrent_runs" else "running or waiting on pack calls"
            message = (
                f"the sandbox is busy: {busy.size} runs are {doing} ({busy.key}) and none ended within {wait} s; "
                "this run was not started, try again shortly"
            )
            return RunResult(None, "", Verdict.BUSY.error(message), 0)
        try:
            return await self._run_in_worker(frame, limits, seat, on_call, on_progress, on_sites)
        finally:
            seat.leave()

    async def _run_in_worker(
        self,
        frame: bytes,
        limits: Limits,
        seat: Seat,
        on_call: OnCall,
        on_progress: OnProgress | None,
        on_sites: OnSites | None,
    ) -> RunResult:
        # A worker lost with the zygote before the snippet made any pack call had no effect outside
        # itself: the run is safely repeated once in a fresh worker from the restarted zygote.
        retries = 1
        while True:
            item, deferred = await self._acquire(_confinement(limits))
            if isinstance(item, SpawnFailure):
                return RunResult(None, "", Verdict.CRASHED.error(item.reason), 0)
            item.taken = True
            run = Run(item, limits, on_call, on_progress, on_sites, self._memory, seat=seat)
            clean = False
            try:
                result = await run.drive(frame)
                clean = run.finished
            finally:
                # A worker that did not finish cleanly (timed out, crashed, broke the protocol, or the run was
                # cancelled) may still be running: it is killed at once.
                if not clean:
                    item.discard()
                if not self._closing:
                    self._after_run(item if clean else None, replace=deferred)
            if not (item.lost and run.calls == 0 and retries):
                return result
            retries -= 1
