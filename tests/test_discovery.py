"""The discovery file: private, atomic, owned by one live gateway, and never a crash for its readers."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from onetool import __version__, discovery
from onetool.state.paths import runtime_dir


@pytest.fixture
def folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The runtime folder, not created yet."""
    run = tmp_path / "runtime" / "onetool"
    monkeypatch.setenv("ONETOOL_RUNTIME_DIR", str(run))
    return run


@pytest.fixture
def other_gateway() -> Iterator[int]:
    """The pid of another live process, standing in for another gateway."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        yield proc.pid
    finally:
        proc.kill()
        proc.wait()


def exited_pid() -> int:
    """The pid of a process that has exited and been reaped."""
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def record(**changes: object) -> dict[str, object]:
    """The JSON of a discovery file another process wrote."""
    written = {"url": "http://127.0.0.1:9/mcp", "pid": 1, "admin_token": "theirs", "version": "0"}
    return {**written, "started_at": "2026-01-01T00:00:00+00:00", **changes}


def plant(path: Path, pid: int) -> dict[str, object]:
    planted = record(pid=pid)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(planted))
    return planted


def test_write_creates_a_private_file_in_a_private_folder(folder: Path) -> None:
    token = discovery.generate_token()
    path = discovery.write("http://127.0.0.1:8765/mcp", token)
    assert path == folder / "gateway.json" == discovery.discovery_file()
    assert stat.S_IMODE(os.stat(folder).st_mode) == 0o700
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert os.listdir(folder) == ["gateway.json"], "no temp file left behind"
    found = discovery.read()
    assert found is not None
    assert (found.url, found.pid, found.admin_token, found.version) == (
        "http://127.0.0.1:8765/mcp",
        os.getpid(),
        token,
        __version__,
    )
    assert abs(time.time() - found.started_at.timestamp()) < 60
    assert token not in repr(found)


def test_generated_tokens_are_long_and_fresh() -> None:
    tokens = {discovery.generate_token() for _ in range(10)}
    assert len(tokens) == 10
    assert all(len(t) >= 43 for t in tokens)


def test_a_stale_file_is_ignored_and_replaced(folder: Path) -> None:
    path = folder / "gateway.json"
    plant(path, exited_pid())
    assert discovery.read() is None
    assert discovery.write("http://127.0.0.1:1234/mcp", "mine") == path
    found = discovery.read()
    assert found is not None and (found.pid, found.admin_token) == (os.getpid(), "mine")


def test_a_zombie_counts_as_dead(folder: Path) -> None:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])  # exits, and stays unreaped until wait()
    try:
        stat_file = Path(f"/proc/{proc.pid}/stat")
        deadline = time.monotonic() + 10
        while stat_file.read_text().rsplit(")", 1)[1].split()[0] != "Z":
            assert time.monotonic() < deadline, "the child never exited"
            time.sleep(0.02)
        plant(folder / "gateway.json", proc.pid)
        assert discovery.read() is None
    finally:
        proc.wait()


def test_a_live_gateways_file_is_kept(folder: Path, other_gateway: int) -> None:
    path = folder / "gateway.json"
    planted = plant(path, other_gateway)
    before = path.read_bytes()
    found = discovery.read()
    assert found is not None and (found.pid, found.admin_token) == (other_gateway, "theirs")
    assert discovery.write("http://127.0.0.1:1234/mcp", "mine") is None
    assert path.read_bytes() == before
    assert discovery.remove() is False
    assert json.loads(path.read_text()) == planted, "stopping must not remove another gateway's file"


def test_remove_leaves_another_processs_file_alone(folder: Path, other_gateway: int) -> None:
    path = folder / "gateway.json"
    plant(path, other_gateway)
    assert discovery.remove() is False
    assert path.exists()
    assert discovery.remove(expected_pid=other_gateway) is True
    assert not path.exists()
    assert discovery.remove() is False, "an absent file is not an error"


@pytest.mark.parametrize(
    "content",
    [
        b"",
        b"garbage{",
        b"[1, 2]",
        b'{"url": "u"}',
        b"\xff\xfe",
        *(json.dumps(record(pid=pid)).encode() for pid in (0, -1, "1", True, 2**80, 1.5)),
        json.dumps(record(url=1)).encode(),
        json.dumps(record(started_at="not a time")).encode(),
        b"{" + b" " * (discovery.MAX_BYTES + 10) + b"}",
    ],
)
def test_a_malformed_file_reads_as_none_and_is_replaced(folder: Path, content: bytes) -> None:
    path = folder / "gateway.json"
    folder.mkdir(parents=True)
    path.write_bytes(content)
    assert discovery.read() is None
    assert discovery.remove() is False
    assert path.read_bytes() == content
    assert discovery.write("http://127.0.0.1:1/mcp", "mine") == path
    assert discovery.read() is not None


def test_an_unreadable_path_reads_as_none(folder: Path) -> None:
    (folder / "gateway.json").mkdir(parents=True)  # a folder where the file should be
    assert discovery.read() is None


def test_runtime_folder_precedence(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ONETOOL_RUNTIME_DIR", str(tmp_path / "explicit"))
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path / "xdg"))
    monkeypatch.setenv("ONETOOL_STATE_DIR", str(tmp_path / "state"))
    assert runtime_dir() == tmp_path / "explicit"
    monkeypatch.delenv("ONETOOL_RUNTIME_DIR")
    assert runtime_dir() == tmp_path / "xdg" / "onetool"
    monkeypatch.delenv("XDG_RUNTIME_DIR")
    assert runtime_dir() == tmp_path / "state" / "run"


def test_reading_the_discovery_file_does_not_load_the_database_stack() -> None:
    code = (
        "import sys, onetool.discovery; print(sorted(m for m in ('sqlalchemy', 'alembic', 'mcp') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout
    assert out.strip() == "[]"
