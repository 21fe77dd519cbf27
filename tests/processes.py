"""Start a process that announces itself with one line on stdout (a URL), and read that line within a deadline;
stop a process as a service manager would, and kill it if it does not stop.

Used by the tests and by bench/, so it needs nothing from pytest: a process that never prints, or never stops,
would otherwise hang the whole run or outlive it.
"""

from __future__ import annotations

import queue
import shlex
import subprocess
import tempfile
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

__all__ = ["START_DEADLINE", "start_and_read_line", "stop"]

START_DEADLINE = 30.0
"""Seconds; generous, as the machine may be busy. A start that takes this long is a hang, not a slow start."""


def start_and_read_line(
    command: Sequence[str], *, deadline: float = START_DEADLINE, stderr: Path | None = None, **popen: Any
) -> tuple[subprocess.Popen[str], str]:
    """Start ``command`` with stdout on a pipe; the process and the first line it prints (no newline).

    stderr goes to the file ``stderr`` (for the caller to read later) or to a temporary file. If no line comes
    within ``deadline`` seconds, or the process exits first, it is killed and reaped and AssertionError says
    what it wrote to stderr. ``popen`` goes to :class:`subprocess.Popen` (env, cwd, preexec_fn, ...).
    """
    with open(stderr, "w+") if stderr is not None else tempfile.TemporaryFile("w+") as errors:
        proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=errors, text=True, **popen)
        assert proc.stdout is not None
        lines = _read_line(proc.stdout)
        line = _get(lines, deadline)
        if line:
            return proc, line.removesuffix("\n")
        proc.kill()
        proc.wait()
        errors.seek(0)
        written = errors.read()
    # Close stdout once the reader is done with it (the kill ended the line it waited for); a grandchild that
    # still holds the pipe keeps the reader, a daemon, until the run ends.
    if line == "" or _get(lines, 5) is not None:
        proc.stdout.close()
    why = (
        f"printed no line on stdout within {deadline} s (killed)"
        if line is None
        else f"exited with status {proc.returncode} before printing a line"
    )
    raise AssertionError(f"{shlex.join(command)} {why}; its stderr: {written or '(empty)'}")


def stop(proc: subprocess.Popen[Any], grace: float = 10.0) -> bool:
    """SIGTERM, then SIGKILL if ``proc`` has not exited ``grace`` seconds later; reaped either way, and its stdout
    closed. Whether it stopped on SIGTERM (a process that had already exited counts as stopped)."""
    if proc.poll() is None:
        proc.terminate()
    try:
        proc.wait(grace)
        return True
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        return False
    finally:
        if proc.stdout is not None:
            proc.stdout.close()


def _read_line(stdout: IO[str]) -> queue.Queue[str]:
    """A queue that gets the first line of ``stdout`` ("" at end of file), read by a thread.

    A thread, not select(): readline blocks until the newline, so select alone would not bound a process that
    printed part of a line.
    """
    lines: queue.Queue[str] = queue.Queue(maxsize=1)
    threading.Thread(target=lambda: lines.put(stdout.readline()), daemon=True).start()
    return lines


def _get(lines: queue.Queue[str], timeout: float) -> str | None:
    try:
        return lines.get(timeout=timeout)
    except queue.Empty:
        return None
