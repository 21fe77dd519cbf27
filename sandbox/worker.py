"""The worker: a child forked by the zygote that confines itself, says ready, takes one job, runs it, reports.

Everything is already imported (the zygote did it), so a worker only confines itself and waits; the
confinement is done while idle, off the run's critical path. A worker serves exactly one run and is
then killed, so no state survives.
"""

from __future__ import annotations

import os
import random
import tempfile
from typing import NoReturn

from sandbox.channel import JOB_CAP, FdChannel, ProtocolError
from sandbox.confine import confine, set_parent_death_signal
from sandbox.runtime import oversized, run_job

_PREFAULT_JOB = {
    "code": "def f(x):\n    return {'x': [x, str(x)]}\nfor i in range(3):\n    print(f(i))\nf(1)",
    "packs": {},
    "unrestricted": False,
    "limits": {"max_output": 1000, "max_calls": 0, "max_recursion": 100, "memory_mb": 0},
}


def serve(fd: int, program: bytes, memory_mb: int, cpu_seconds: float, zygote_pid: int) -> NoReturn:
    """Run in the forked child; never returns. `fd` is this worker's end of its channel to the host."""
    # Die with the zygote, which dies with the host.
    set_parent_death_signal(zygote_pid)
    os.setsid()
    # The forked random state is the zygote's: without a reseed every run would draw the same numbers.
    random.seed()
    # A fresh empty working directory, removed at once: nothing can be created in it, nothing is left behind.
    directory = tempfile.mkdtemp(prefix="onetool-sandbox-")
    os.chdir(directory)
    os.rmdir(directory)
    confine(program, memory_mb, cpu_seconds, (fd,))
    channel = FdChannel(fd, fd, JOB_CAP)
    # A forked child shares the zygote's pages copy-on-write, and running Python writes to every object it
    # touches (reference counts): done by the first run, those page copies cost milliseconds. A constant,
    # trusted job of ours takes them now, while idle; it makes no pack call and its namespace is dropped.
    run_job(_PREFAULT_JOB, channel)
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
    os._exit(0)
