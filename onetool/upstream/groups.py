"""Process groups of stdio upstreams: which process a pid is, ending a group without ever signalling a pid the
system has since given to another process, and the warden that ends them all when the gateway goes.

The warden runs this file as a script (``python -I -S groups.py``), one per gateway. It reads "+ PGID STARTED"
and "- PGID" lines from the gateway and, at the end of its input, SIGKILLs every group still listed. Its input
ends when the gateway closes it on the way out, and when the kernel closes it because the gateway died,
``kill -9`` included. Standard library only: it starts in milliseconds, without OneTool's packages.

Why not only PR_SET_PDEATHSIG in each upstream: the parent-death signal reaches the process that asked for it,
not what that process started (``npx`` -> ``node``, ``sh -c`` -> ``python``, a server's own workers), and it
fires when the thread that forked it ends, not the process. A SIGKILL to the group reaches them all.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Iterable
from contextlib import suppress

__all__ = ["boot_id", "end_group", "start_time", "stat_fields", "watch"]

_STARTTIME = 19  # field 22 of /proc/PID/stat, counted from the state (field 3)


def stat_fields(pid: int) -> list[bytes] | None:
    """The fields of ``/proc/PID/stat`` after the command name (state, ppid, pgrp, ...); None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return None
    # The command name may hold spaces and parentheses: the fields start after the last ')'.
    return stat[stat.rindex(b")") + 2 :].split()


def start_time(pid: int) -> int | None:
    """When ``pid`` started, in clock ticks since boot: with the pid (and the boot), it names one process."""
    fields = stat_fields(pid)
    return int(fields[_STARTTIME]) if fields else None


def boot_id() -> str:
    """This boot's id: start times count from the boot, so a record from an earlier boot names no process now."""
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            return f.read().strip()
    except OSError:
        return ""


def end_group(pgid: int, started: int) -> bool:
    """SIGKILL process group ``pgid``, whose leader (pid ``pgid``) started at ``started``; whether it was signalled.

    A leader that is now another process (another start time) means the group is long gone and its number given
    to someone else: it is left alone. A leader that is gone is no obstacle: the kernel gives no new process a
    number that a group still uses, so whatever is left in that group is what the leader started.
    """
    if pgid <= 1:  # 0 would be our own group, 1 is init: never an upstream's
        return False
    leader = start_time(pgid)
    if leader is not None and leader != started:
        return False
    try:
        os.killpg(pgid, signal.SIGKILL)
    except OSError:  # no member left, or none we may signal
        return False
    return True


def watch(lines: Iterable[bytes]) -> None:
    """The warden's life: follow the gateway's "+ PGID STARTED" and "- PGID" lines; at their end, end every group
    still listed."""
    groups: dict[int, int] = {}
    for line in lines:
        with suppress(ValueError):
            match line.split():
                case [b"+", group, leader_started]:
                    groups[int(group)] = int(leader_started)
                case [b"-", group]:
                    groups.pop(int(group), None)
    for pgid, started in groups.items():
        end_group(pgid, started)


if __name__ == "__main__":
    watch(sys.stdin.buffer)
