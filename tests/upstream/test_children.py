"""The records of stdio upstreams and the warden: what a gone gateway of the same config left is ended at start,
only where the recorded start time still names the process; what is still listed when the gateway goes is ended
by the warden."""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from onetool.state.paths import project_key
from onetool.upstream.children import RECORDS, watched_children
from onetool.upstream.groups import boot_id, start_time

pytestmark = pytest.mark.anyio

Start = Callable[[], subprocess.Popen[bytes]]


@pytest.fixture
def leader() -> Iterator[Start]:
    """Start processes that lead a process group of their own, as stdio upstreams do; all killed at the end."""
    started: list[subprocess.Popen[bytes]] = []

    def start() -> subprocess.Popen[bytes]:
        proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], start_new_session=True)
        started.append(proc)
        return proc

    yield start
    for proc in started:
        proc.kill()
        proc.wait()


def records(config: Path) -> Path:
    return Path(os.environ["ONETOOL_RUNTIME_DIR"]) / RECORDS / project_key(config)


def write_record(config: Path, gateway: int, started: int | None, children: list[dict[str, Any]]) -> Path:
    """A record as the gateway ``gateway`` (started at ``started``) would have left it."""
    path = records(config) / f"{gateway}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        json.dumps({"gateway": {"pid": gateway, "started": started, "boot": boot_id()}, "children": children})
    )
    return path


def child(proc: subprocess.Popen[bytes], started: int | None = None) -> dict[str, Any]:
    real = start_time(proc.pid)
    return {"server": "s", "pid": proc.pid, "pgid": proc.pid, "started": real if started is None else started}


def dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


async def test_a_killed_gateways_groups_end_at_start_but_a_pid_now_someone_elses_is_left_alone(
    tmp_path: Path, leader: Start
) -> None:
    config = tmp_path / "onetool.yaml"
    ours, reused = leader(), leader()
    reused_started = start_time(reused.pid)
    assert reused_started is not None
    # The pid `reused` has now was, in this record, a process that started earlier: not the same process.
    record = write_record(config, dead_pid(), 1, [child(ours), child(reused, reused_started - 1)])
    async with watched_children(config):
        assert ours.wait(10) == -signal.SIGKILL
        assert reused.poll() is None
        assert not record.exists()


async def test_a_live_gateways_record_and_another_configs_are_left_alone(tmp_path: Path, leader: Start) -> None:
    config, other = tmp_path / "onetool.yaml", tmp_path / "other.yaml"
    gateway, its_child, others_child = leader(), leader(), leader()
    live = write_record(config, gateway.pid, start_time(gateway.pid), [child(its_child)])
    elsewhere = write_record(other, dead_pid(), 1, [child(others_child)])
    async with watched_children(config):
        pass
    assert its_child.poll() is None and others_child.poll() is None
    assert live.exists() and elsewhere.exists()


async def test_the_warden_ends_the_groups_still_listed_when_the_gateway_goes(tmp_path: Path, leader: Start) -> None:
    config = tmp_path / "onetool.yaml"
    path = records(config) / f"{os.getpid()}.json"
    async with watched_children(config) as children:
        listed, ended = leader(), leader()
        children.add("a", listed.pid)
        children.add("b", ended.pid)
        children.remove(ended.pid)
        record = json.loads(path.read_text())
        assert record["gateway"]["pid"] == os.getpid()
        assert record["children"] == [child(listed) | {"server": "a"}]
        assert listed.poll() is None
    assert listed.wait(10) == -signal.SIGKILL
    assert ended.poll() is None  # forgotten: the warden never signals a group it was told has ended
    assert not path.exists()


async def test_the_records_and_the_runtime_folder_they_are_in_are_private(tmp_path: Path, leader: Start) -> None:
    config = tmp_path / "onetool.yaml"
    async with watched_children(config) as children:
        children.add("a", leader().pid)
        path = records(config) / f"{os.getpid()}.json"
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        for folder in (path.parent, path.parent.parent, Path(os.environ["ONETOOL_RUNTIME_DIR"])):
            assert stat.S_IMODE(folder.stat().st_mode) == 0o700, folder
