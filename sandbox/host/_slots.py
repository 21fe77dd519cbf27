"""What a run holds of the sandbox: a worker slot for its whole life, a CPU slot only while its worker may compute.

A worker blocked on pack-call replies computes nothing. If it kept its CPU slot, runs waiting on a slow or hung
upstream would keep runs that never call it from starting (one stopped upstream once took every slot). So a run
lends its CPU slot (`sandbox.max_concurrent_runs`) while all its worker's calls are out, and takes it back before
a reply reaches the worker; the worker, and the memory it may use, still count against `sandbox.max_workers`, a
larger cap, so memory stays bounded however long upstreams take.
"""

from __future__ import annotations

import contextlib

import anyio

__all__ = ["Busy", "Seat", "Slots"]


class Busy(Exception):
    """No slot came free in time; ``key`` is the config key of the cap that was full."""

    def __init__(self, key: str, size: int) -> None:
        super().__init__(key)
        self.key = key
        self.size = size


class Slots:
    """The sandbox's two caps: runs computing at once (CPU) and runs holding a worker at once."""

    def __init__(self, cpu: int, workers: int) -> None:
        self.cpu = cpu
        self.workers = workers
        self._cpu = anyio.Semaphore(cpu, fast_acquire=True)
        self._workers = anyio.Semaphore(workers, fast_acquire=True)

    def taken(self) -> tuple[int, int, int]:
        """Runs computing, runs holding a worker, and runs waiting in line for either slot, now."""
        waiting = self._cpu.statistics().tasks_waiting + self._workers.statistics().tasks_waiting
        return self.cpu - self._cpu.value, self.workers - self._workers.value, waiting

    def seat(self) -> Seat:
        """A seat holding nothing yet."""
        return Seat(self._cpu, self._workers)

    async def take(self, wait: float) -> Seat:
        """A seat holding both slots, in arrival order; Busy if they are not both free within ``wait`` seconds."""
        seat = self.seat()
        if seat.take_now():
            return seat
        try:
            with anyio.move_on_after(wait):
                await seat.take_worker()
                await seat.sit()
                return seat
        except BaseException:
            seat.leave()
            raise
        seat.leave()
        if seat.had_worker:
            raise Busy("sandbox.max_concurrent_runs", self.cpu)
        raise Busy("sandbox.max_workers", self.workers)


class Seat:
    """One run's slots. ``stand`` lends the CPU slot while the worker waits on calls; ``sit`` takes it back."""

    def __init__(self, cpu: anyio.Semaphore, workers: anyio.Semaphore) -> None:
        self._cpu = cpu
        self._workers = workers
        self._worker = False
        self._seated = False
        self.had_worker = False
        # A worker that sends a call while a reply waits for the slot would make two sits race for it: one wins.
        self._sitting = anyio.Lock(fast_acquire=True)

    def take_now(self) -> bool:
        """Both slots, if they are free: no trip round the event loop on a run's critical path."""
        with contextlib.suppress(anyio.WouldBlock):
            self._workers.acquire_nowait()
            self._worker = self.had_worker = True
            self._cpu.acquire_nowait()
            self._seated = True
        return self._seated

    async def take_worker(self) -> None:
        if not self._worker:
            await self._workers.acquire()
            self._worker = self.had_worker = True

    async def sit(self) -> None:
        """Hold the CPU slot (waiting in line for it): the worker is about to compute."""
        if self._seated:
            return
        if not self._sitting.locked():
            with contextlib.suppress(anyio.WouldBlock):
                self._cpu.acquire_nowait()  # free: taken at once
                self._seated = True
                return
        async with self._sitting:
            if not self._seated:
                await self._cpu.acquire()
                self._seated = True

    def stand(self) -> None:
        """Lend the CPU slot to other runs: the worker only waits for replies."""
        if self._seated:
            self._seated = False
            self._cpu.release()

    def leave(self) -> None:
        """Give back whatever the seat holds."""
        self.stand()
        if self._worker:
            self._worker = False
            self._workers.release()
