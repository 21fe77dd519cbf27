"""The worker: a child forked by the zygote that confines itself, says ready, takes one job, runs it, reports.

Everything is already imported (the zygote did it), so a worker only confines itself and waits; the
confinement is done while idle, off the run's critical path. A worker serves exactly one run and is
then killed, so no state survives.
"""

from __future__ import annotations

import os
import sys
from typing import Any, NoReturn

from sandbox.protocol.channel import JOB_CAP, ProtocolError, encode
from sandbox.worker._fd_channel import FdChannel
from sandbox.worker._runtime import oversized, run_job
from sandbox.worker.confine import Confinement, confine

__all__ = ["WARM_UP_RUNS", "prepare", "serve", "warm_up"]

_LIMITS = {"max_output": 1000, "max_calls": 1, "max_recursion": 100, "memory_mb": 0}
_WARM_UP_JOB = {
    "code": "def f(x):\n    return {'x': [x, str(x)]}\nfor i in range(3):\n    print(f(i))\np.echo(f(1), text='x')",
    "packs": {"p": ["echo"]},
    "limits": _LIMITS,
}
"""The fork-server's own warm-up (`warm_up`): broad, so that what many kinds of snippet make lazily is made
once, in pages every worker shares. Run ten times per fork-server, its cost does not count."""
_PREFAULT_JOB = {"code": "print(p.echo([1, 'x'], text='x'))", "packs": {"p": ["echo"]}, "limits": _LIMITS}
"""Each pool worker's prefault job (`serve`): the path every run takes (compile, a pack call, print, the
result), in one line. Its page faults are the point and its Python the price, paid once per run. Measured on
forks of a warmed fork-server, against the warm-up job in its place: 435 faults and 1.4 ms of CPU instead of
475 and 1.8 ms, while the run after it takes nearly as few faults (`1+1`: 15 instead of 13; one pack call: 14
instead of 9; a call, a dict and a print: 43 instead of 21)."""


class _Loopback(FdChannel):
    """The prefault job's channel: a pack call is answered at once, here, framed and encoded as the host's
    replies are, so the pages a pack call touches are copied while idle too; nothing reaches the host."""

    def __init__(self) -> None:
        super().__init__(-1, -1, JOB_CAP)

    def send(self, message: Any) -> None:
        if message["op"] != "call":
            return  # the call sites the job shows: the host would check them
        self._reader.feed(encode({"id": message["id"], "value": {"x": [1, "1"]}}, self.max_size))


WARM_UP_RUNS = 10
"""Times the fork-server runs the warm-up job itself before it forks (`warm_up`). Measured on a zygote: a worker
took 793 page faults with none, 739 after one, 715 after ten, no fewer after a hundred."""


def warm_up() -> None:
    """Run the warm-up job in the fork-server, confined as it is, before it forks anything: what a first run
    makes lazily (the interpreter's specialised bytecode, caches, interned names, the allocator's pools) is
    then made once, in pages every worker shares, rather than copied into each worker. The job is our own
    constant code, the same in every fork-server: no snippet ever runs here, and nothing a run does reaches
    these pages back."""
    limit = sys.getrecursionlimit()
    for _ in range(WARM_UP_RUNS):
        run_job(_WARM_UP_JOB, _Loopback())
    sys.setrecursionlimit(limit)  # run_job sets a snippet's; the fork-server's own code keeps its default


def prepare(fd: int, confinement: Confinement, memory_mb: int, cpu_seconds: float, parent_pid: int) -> None:
    """Turn a child freshly forked by the zygote (set up by sandbox.worker.zygote.setup) into a confined worker whose
    only way out is `fd`. The one place this is done: the tests' confined runner (tests/sandbox/worker/confined.py)
    calls it too. The random module reseeds itself in every child os.fork() makes (os.register_at_fork), so
    no run draws the zygote's numbers."""
    os.setsid()
    # It dies with the zygote (parent_pid), which dies with the host.
    confine(confinement, memory_mb, cpu_seconds, (fd,), parent_pid)


def serve(
    fd: int, confinement: Confinement, memory_mb: int, cpu_seconds: float, parent_pid: int, *, prefault: bool = True
) -> NoReturn:
    """Run in the forked child; never returns. `fd` is this worker's end of its channel to the host."""
    prepare(fd, confinement, memory_mb, cpu_seconds, parent_pid)
    channel = FdChannel(fd, fd, JOB_CAP)
    # A forked child shares the zygote's pages copy-on-write, and running Python writes to every object it
    # touches (reference counts): done by the first run, those page copies cost milliseconds. A constant,
    # trusted job of ours takes them now, while idle; its one pack call is answered by a loopback, and its
    # namespace is dropped.
    if prefault:
        run_job(_PREFAULT_JOB, _Loopback())
    channel.send({"op": "ready"})
    try:
        job = channel.receive()
    except EOFError:
        os._exit(0)
    limits = job["limits"]
    channel.max_size = limits["max_message"]
    reply = run_job(job, channel)
    try:
        channel.send(reply)
    except ProtocolError:
        channel.send(oversized(reply, limits["max_message"]))
    # Not exit now: tearing this process down takes about a millisecond of CPU, which the scheduler may take
    # from the host just as it reads the reply and answers its client. The host kills us once it has it.
    while os.read(fd, 4096):
        pass
    os._exit(0)
