"""The worker process: import everything, say ready, take one job, confine itself, run it, report.

Started by the host as `python -I -S -c <bootstrap> <host pid> <seccomp program, hex>` with an empty
environment, in an empty temporary directory. A worker serves exactly one run and is then killed, so no state survives.
"""

from __future__ import annotations

import gc
import os
import sys
import time

from sandbox.channel import FdChannel, ProtocolError
from sandbox.confine import confine, set_parent_death_signal
from sandbox.runtime import oversized, run_job

_JOB_CAP = 1 << 30
"""The host is trusted; its job message is bounded by the code it was given."""


def main() -> None:
    set_parent_death_signal(int(sys.argv[1]))
    # The channel moves off stdin/stdout, which become /dev/null, so stray writes to fd 1 cannot corrupt it.
    channel = FdChannel(os.dup(0), os.dup(1), _JOB_CAP)
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    os.close(devnull)
    program = bytes.fromhex(sys.argv[2])
    # glibc reads /etc/localtime once; after confinement it could not.
    time.localtime()
    gc.freeze()
    channel.send({"op": "ready"})
    try:
        job = channel.receive()
    except EOFError:
        os._exit(0)
    limits = job["limits"]
    confine(program, limits["memory_mb"], limits["cpu_seconds"], (channel.read_fd, channel.write_fd))
    channel.max_size = limits["max_message"]
    reply = run_job(job, channel)
    try:
        channel.send(reply)
    except ProtocolError:
        channel.send(oversized(reply, limits["max_message"]))
    os._exit(0)


if __name__ == "__main__":
    main()
