"""`onetool logs`: real records of a real log file, filtered by run, server and level, escaped, and followed."""

from __future__ import annotations

import queue
import subprocess
import threading
from pathlib import Path

import pytest

from onetool.logs import LogSpan, logger
from tests.conftest import logging_as_configured
from tests.gateways import ONETOOL, write_config
from tests.processes import START_DEADLINE, stop


@pytest.fixture
def log(tmp_path: Path) -> Path:
    """A log file with two runs' records and records about two servers whose names share a prefix."""
    path = tmp_path / "gateway.log"
    with logging_as_configured(file=path):
        with logger.contextualize(runId="run1"), LogSpan("run", codeLength=9):
            logger.bind(server="github").info("called github")
        logger.bind(server="git").warning("server 'git': connection lost")
        with logger.contextualize(runId="run2"):
            # Text that reads like the fields asked for, inside a quoted message: it is no field.
            logger.bind(server="github").error('upstream said "server=git runId=run1"')
    return path


def logs(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([ONETOOL, "logs", *args], capture_output=True, text=True, timeout=30)


def messages(out: str) -> list[str]:
    return [line.split(None, 2)[2] for line in out.splitlines()]


def test_run_server_and_level_filter_real_records(log: Path) -> None:
    run1 = logs("--log-file", str(log), "--run", "run1")
    assert run1.returncode == 0, run1.stderr
    shown = messages(run1.stdout)
    assert [m.split()[0] for m in shown] == ["called", "run"] and all(" runId=run1" in m for m in shown)
    git = logs("--log-file", str(log), "--server", "git")
    assert messages(git.stdout) == ["server 'git': connection lost server=git"]
    errors = logs("--log-file", str(log), "--level", "error")
    assert [line.split()[1] for line in errors.stdout.splitlines()] == ["ERROR"]
    everything = logs("--log-file", str(log))
    assert everything.stdout.count("\n") == 4


def test_the_configured_log_file_is_read_and_what_it_holds_is_escaped(log: Path, tmp_path: Path) -> None:
    with log.open("a") as f:
        f.write("Traceback (most recent call last): \x1b]52;c;cHduZWQ=\x07\n")  # raw text after a record
    config = write_config(tmp_path, {"log": {"file": log.name}})  # relative to the config file
    shown = logs("--config", str(config), "--level", "error")
    assert shown.returncode == 0, shown.stderr
    assert "\x1b" not in shown.stdout and "\x07" not in shown.stdout
    assert shown.stdout.splitlines()[-1] == "Traceback (most recent call last): \\x1b]52;c;cHduZWQ=\\x07"


def test_no_log_file_is_a_usage_error(tmp_path: Path) -> None:
    refused = logs("--config", str(write_config(tmp_path, {})))
    assert refused.returncode == 2 and "no log file" in refused.stderr


def test_follow_prints_a_record_appended_after_it_started(log: Path) -> None:
    proc = subprocess.Popen(
        [ONETOOL, "logs", "--log-file", str(log), "--follow", "--server", "git"], stdout=subprocess.PIPE, text=True
    )
    lines: queue.Queue[str] = queue.Queue()

    def read() -> None:
        for line in proc.stdout or ():
            lines.put(line)

    threading.Thread(target=read, daemon=True).start()
    try:
        assert "connection lost" in lines.get(timeout=START_DEADLINE)  # it has read the file: it follows now
        with logging_as_configured(file=log):
            logger.bind(server="github").info("not this one")
            logger.bind(server="git").info("server 'git': connected")
        assert lines.get(timeout=START_DEADLINE).rstrip("\n").split(None, 2)[2] == "server 'git': connected server=git"
    finally:
        stop(proc)


def test_a_reader_that_stops_early_ends_it_quietly(tmp_path: Path) -> None:
    """`onetool logs | head -1`: the closed pipe ends the command with status 0 and no traceback."""
    big = tmp_path / "big.log"
    big.write_text("".join(f"14:00:00.000 INFO    record {i}\n" for i in range(5_000)))  # beyond a pipe's buffer
    proc = subprocess.Popen(
        [ONETOOL, "logs", "--log-file", str(big)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None and proc.stdout.readline() == "14:00:00.000 INFO    record 0\n"
    proc.stdout.close()
    _, errors = proc.communicate(timeout=30)
    assert (proc.returncode, errors) == (0, "")
