"""tests.processes: a process that never announces itself fails its test promptly and is killed, not waited on."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import uuid
from pathlib import Path

import pytest

from tests.gateways import processes_with
from tests.processes import start_and_read_line, stop

SILENT = "import sys, time; print('about to sleep', file=sys.stderr, flush=True); time.sleep(60)"


def test_the_first_line_comes_back_and_the_process_runs_on() -> None:
    proc, line = start_and_read_line([sys.executable, "-c", "print('http://x/mcp'); input()"], stdin=subprocess.PIPE)
    try:
        assert line == "http://x/mcp" and proc.poll() is None
    finally:
        proc.kill()
        proc.communicate()


def test_a_silent_process_fails_within_the_deadline_and_is_killed() -> None:
    # The helper runs in a thread joined with a bound, so a helper that waited for ever fails this test too.
    failures: list[AssertionError] = []
    marker = f"silent-{uuid.uuid4().hex}"

    def start() -> None:
        try:
            start_and_read_line([sys.executable, "-c", SILENT], deadline=1, env={**os.environ, "MARKER": marker})
        except AssertionError as e:
            failures.append(e)

    thread = threading.Thread(target=start, daemon=True)
    thread.start()
    thread.join(20)
    assert not thread.is_alive(), "start_and_read_line still waits for a line after 20 s"
    [failure] = failures
    assert "printed no line on stdout within 1 s (killed); its stderr: " in str(failure)
    assert processes_with(marker) == []  # killed and reaped: not even a zombie


def test_a_process_that_exits_first_fails_with_its_status_and_stderr(tmp_path: Path) -> None:
    command = [sys.executable, "-c", "import sys; sys.exit('no config here')"]
    with pytest.raises(AssertionError, match=r"exited with status 1 before printing a line; its stderr: no config"):
        start_and_read_line(command, stderr=tmp_path / "err")
    assert (tmp_path / "err").read_text() == "no config here\n"


def test_stop_kills_a_process_that_ignores_sigterm() -> None:
    stubborn = (
        "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('up', flush=True); time.sleep(60)"
    )
    proc, _ = start_and_read_line([sys.executable, "-c", stubborn])
    assert stop(proc, grace=0.5) is False
    assert proc.returncode == -9 and proc.stdout is not None and proc.stdout.closed
    polite, _ = start_and_read_line([sys.executable, "-c", "import time; print('up', flush=True); time.sleep(60)"])
    assert stop(polite) is True and polite.returncode == -15
