"""The discovery files: one per config, private, atomic, each owned by one live gateway, never a crash for its
readers."""

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

from onetool import __version__
from onetool.attach import discovery
from onetool.state.paths import runtime_dir

CONFIG = Path("/projects/app/onetool.yaml")


@pytest.fixture
def folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The runtime folder's folder of discovery files, not created yet."""
    run = tmp_path / "runtime" / "onetool"
    monkeypatch.setenv("ONETOOL_RUNTIME_DIR", str(run))
    return run / discovery.FOLDER


@pytest.fixture
def path(folder: Path) -> Path:
    """The discovery file of CONFIG's gateway."""
    return discovery.discovery_file(CONFIG)


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
    path = discovery.write("http://127.0.0.1:8765/mcp", token, CONFIG)
    assert path == folder / f"app-{path.stem.rsplit('-', 1)[1]}.json" == discovery.discovery_file(CONFIG)
    assert stat.S_IMODE(os.stat(folder).st_mode) == 0o700
    assert stat.S_IMODE(os.stat(folder.parent).st_mode) == 0o700
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert os.listdir(folder) == [path.name], "no temp file left behind"
    found = discovery.read(path)
    assert found is not None
    assert (found.url, found.pid, found.admin_token, found.version, found.config, found.file) == (
        "http://127.0.0.1:8765/mcp",
        os.getpid(),
        token,
        __version__,
        str(CONFIG),
        path,
    )
    assert abs(time.time() - found.started_at.timestamp()) < 60
    assert token not in repr(found)


def test_generated_tokens_are_long_fresh_and_pass_as_an_option_value() -> None:
    tokens = {discovery.generate_token() for _ in range(200)}
    assert len(tokens) == 200
    # A token starting with "-" reads as an option to `--token VALUE` (one in 32 URL-safe tokens did).
    assert all(len(t) == 64 and t[0] != "-" and int(t, 16) >= 0 for t in tokens)


def test_a_stale_file_is_ignored_and_replaced(path: Path) -> None:
    plant(path, exited_pid())
    assert discovery.read(path) is None
    assert discovery.write("http://127.0.0.1:1234/mcp", "mine", CONFIG) == path
    found = discovery.read(path)
    assert found is not None and (found.pid, found.admin_token) == (os.getpid(), "mine")


def test_a_zombie_counts_as_dead(path: Path) -> None:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])  # exits, and stays unreaped until wait()
    try:
        stat_file = Path(f"/proc/{proc.pid}/stat")
        deadline = time.monotonic() + 10
        while stat_file.read_text().rsplit(")", 1)[1].split()[0] != "Z":
            assert time.monotonic() < deadline, "the child never exited"
            time.sleep(0.02)
        plant(path, proc.pid)
        assert discovery.read(path) is None
    finally:
        proc.wait()


def test_a_live_gateways_file_is_kept(path: Path, other_gateway: int) -> None:
    planted = plant(path, other_gateway)
    before = path.read_bytes()
    found = discovery.read(path)
    assert found is not None and (found.pid, found.admin_token) == (other_gateway, "theirs")
    assert discovery.write("http://127.0.0.1:1234/mcp", "mine", CONFIG) is None
    assert path.read_bytes() == before
    assert discovery.remove(path) is False
    assert json.loads(path.read_text()) == planted, "stopping must not remove another gateway's file"


def test_remove_leaves_another_processs_file_alone(path: Path, other_gateway: int) -> None:
    plant(path, other_gateway)
    assert discovery.remove(path) is False
    assert path.exists()
    assert discovery.remove(path, expected_pid=other_gateway) is True
    assert not path.exists()
    assert discovery.remove(path) is False, "an absent file is not an error"


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
def test_a_malformed_file_reads_as_none_and_is_replaced(path: Path, content: bytes) -> None:
    path.parent.mkdir(parents=True)
    path.write_bytes(content)
    assert discovery.read(path) is None
    assert discovery.remove(path) is False
    assert path.read_bytes() == content
    assert discovery.write("http://127.0.0.1:1/mcp", "mine", CONFIG) == path
    assert discovery.read(path) is not None


def test_an_unreadable_path_reads_as_none(path: Path) -> None:
    path.mkdir(parents=True)  # a folder where the file should be
    assert discovery.read(path) is None
    assert discovery.running() == []


def test_each_config_has_its_own_file_and_running_lists_every_live_one(
    path: Path, other_gateway: int, tmp_path: Path
) -> None:
    plant(path, other_gateway)  # CONFIG's gateway, another process
    elsewhere = tmp_path / "app" / "onetool.yaml"  # another project whose folder has the same name
    mine = discovery.write("http://127.0.0.1:2/mcp", "mine", elsewhere)
    assert mine is not None and mine != path and mine.name.startswith("app-")
    plant(discovery.discovery_file(None), exited_pid())  # a gateway without a config, gone
    running = discovery.running()
    assert [(g.url, g.admin_token, g.file) for g in running] == [
        ("http://127.0.0.1:9/mcp", "theirs", path),  # started first
        ("http://127.0.0.1:2/mcp", "mine", mine),
    ]
    assert running[1].config == str(elsewhere.resolve())


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
        "import sys, onetool.attach.discovery; "
        "print(sorted(m for m in ('sqlalchemy', 'alembic', 'mcp') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout
    assert out.strip() == "[]"
