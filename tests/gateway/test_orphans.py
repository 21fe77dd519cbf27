"""No stdio upstream outlives its gateway (`onetool serve`), however the gateway ends. After a `kill -9`, an upstream
that ignores SIGTERM, SIGHUP and stdin EOF is gone within 5 s, with the process it started itself; when the
gateway's warden was killed too, the next gateway of the same config ends them at start."""

from __future__ import annotations

import os
import signal
import time
import uuid
from collections.abc import Callable, Iterable
from contextlib import suppress
from pathlib import Path
from typing import Any, TypeVar

from onetool.upstream.groups import stat_fields
from tests.conftest import FIXTURES, PYTHON
from tests.gateways import ServedGateway, processes_with, start_http_gateway, stop

T = TypeVar("T")
GONE_WITHIN = 5.0  # seconds: the target, after a `kill -9` of the gateway


def stubborn(marker: str) -> dict[str, Any]:
    """A server that ignores SIGTERM, SIGHUP and stdin EOF, with a child of its own that ignores them too."""
    env = {"ONETOOL_TEST_MARKER": marker}
    return {
        "servers": {
            "stubborn": {"command": PYTHON, "args": [str(FIXTURES / "fault_server.py"), "stubborn"], "env": env}
        }
    }


def poll(check: Callable[[], T], deadline: float) -> T:
    """``check()`` until it is truthy or ``deadline`` seconds have passed; its last value."""
    end = time.monotonic() + deadline
    while not (value := check()) and time.monotonic() < end:
        time.sleep(0.05)
    return value


def parent_and_group(pid: int) -> tuple[int, int] | None:
    fields = stat_fields(pid)
    return (int(fields[1]), int(fields[2])) if fields is not None else None


def alive(pids: Iterable[int]) -> list[int]:
    """Those of ``pids`` still running (a zombie has exited: only its parent's wait is missing)."""
    return [pid for pid in pids if (fields := stat_fields(pid)) is not None and fields[0] != b"Z"]


def upstreams(marker: str) -> list[int]:
    """The stubborn server and its child, once both run."""
    found = poll(lambda: len(pids := processes_with(marker)) >= 2 and pids, 20)
    assert found, f"the stubborn server and its child did not start: {processes_with(marker)}"
    return found


def warden_of(served: ServedGateway) -> int:
    """The gateway's warden: its child that runs onetool/upstream/groups.py."""
    children = [pid for pid in map(int, filter(str.isdigit, os.listdir("/proc"))) if _parent(pid) == served.proc.pid]
    [warden] = [pid for pid in children if Path(f"/proc/{pid}/cmdline").read_bytes().endswith(b"groups.py\0")]
    return warden


def _parent(pid: int) -> int | None:
    found = parent_and_group(pid)
    return found[0] if found else None


def kill_9(served: ServedGateway) -> None:
    served.proc.kill()
    served.proc.wait()
    assert served.proc.stdout is not None
    served.proc.stdout.close()


def kill_leftovers(marker: str) -> None:
    """Whatever a failed test left, so that it fails alone."""
    for pid in processes_with(marker):
        with suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def test_kill_9_of_the_gateway_ends_a_stubborn_upstream_and_its_child(tmp_path: Path) -> None:
    marker = f"orphan-{uuid.uuid4().hex}"
    served = start_http_gateway(tmp_path, stubborn(marker), marker)
    try:
        pids = upstreams(marker)
        [server] = [pid for pid in pids if _parent(pid) == served.proc.pid]
        assert parent_and_group(server) == (served.proc.pid, server)  # it leads a process group of its own
        warden = warden_of(served)
        kill_9(served)
        assert poll(lambda: not alive([*pids, warden]), GONE_WITHIN), f"still running: {alive([*pids, warden])}"
        assert processes_with(marker) == []
    finally:
        kill_leftovers(marker)


def test_a_gateway_ends_at_start_what_a_killed_gateway_and_its_warden_left(tmp_path: Path) -> None:
    marker = f"orphan-{uuid.uuid4().hex}"
    first = start_http_gateway(tmp_path, stubborn(marker), marker)
    try:
        left = upstreams(marker)
        os.kill(warden_of(first), signal.SIGKILL)  # a pending SIGKILL: the warden never reads its end of input
        kill_9(first)
        assert alive(left) == left  # nothing else ends them
        second = start_http_gateway(tmp_path, stubborn(marker), marker)  # the same config file
        try:
            assert poll(lambda: not alive(left), GONE_WITHIN), f"still running: {alive(left)}"
            assert set(upstreams(marker)).isdisjoint(left)  # the second gateway's own upstream runs
        finally:
            assert stop(second.proc) == 0
        assert poll(lambda: processes_with(marker) == [], GONE_WITHIN)
    finally:
        kill_leftovers(marker)
