"""`onetool run` shows the run's progress on one line of a terminal's stderr, attached to a gateway or standalone,
erased before the result; with stderr piped, nothing but the result."""

from __future__ import annotations

import os
import pty
import subprocess
import uuid
from pathlib import Path

import pytest

from tests.admin_api import cli
from tests.conftest import FIXTURES, PYTHON
from tests.gateways import ONETOOL, start_http_gateway, stop, write_config

CONFIG = {"servers": {"fx": {"command": PYTHON, "args": [str(FIXTURES / "fault_server.py"), "ok"]}}}
# Each step outlasts the progress rate, so every one is shown; the message is hostile on purpose.
CODE = "for i in range(3):\n    progress(i + 1, 3, 'step\\x1b[2J')\n    fx.sleep(seconds=0.3)\n'done'"
ERASE = "\r\x1b[2K"


def run_on_a_terminal(config: Path) -> tuple[int, str, str]:
    """`onetool run` with stderr on a pseudo-terminal: its status, stdout, and what the terminal got."""
    controller, terminal = pty.openpty()
    try:
        proc = subprocess.Popen(
            [ONETOOL, "run", "--config", str(config), "-c", CODE],
            stdout=subprocess.PIPE,
            stderr=terminal,
            text=True,
            cwd=config.parent,
        )
        os.close(terminal)
        out, _ = proc.communicate(timeout=60)
        seen = b""
        while True:
            try:
                chunk = os.read(controller, 65536)
            except OSError:  # EIO: the process closed its side
                break
            if not chunk:
                break
            seen += chunk
    finally:
        os.close(controller)
    return proc.returncode, out, seen.decode()


def check_terminal(shown: str) -> None:
    # The control character reached the line as a space (a progress message is one line of plain text).
    assert f"{ERASE}1/3 step [2J{ERASE}2/3 step [2J{ERASE}3/3 step [2J" in shown, repr(shown)
    assert shown.endswith(ERASE), "the line is erased before the result"
    assert "\x1b[2J" not in shown, "the snippet's message cannot drive the terminal"


@pytest.mark.parametrize("attached", [True, False], ids=["attached", "standalone"])
def test_progress_on_a_terminal(tmp_path: Path, attached: bool) -> None:
    config = write_config(tmp_path, CONFIG)
    served = start_http_gateway(tmp_path, CONFIG, f"prog-{uuid.uuid4().hex}") if attached else None
    try:
        status, out, shown = run_on_a_terminal(config)
        assert (status, out) == (0, "done\n")
        check_terminal(shown)
        if served is not None:
            assert "span=run " in served.log.read_text(), "it ran on the gateway"
    finally:
        if served is not None:
            assert stop(served.proc) == 0


def test_no_progress_when_stderr_is_piped(tmp_path: Path) -> None:
    config = write_config(tmp_path, CONFIG)
    served = start_http_gateway(tmp_path, CONFIG, f"prog-{uuid.uuid4().hex}")
    try:
        done = cli("run", "--config", str(config), "-c", CODE)
        assert (done.returncode, done.stdout, done.stderr) == (0, "done\n", "")
    finally:
        assert stop(served.proc) == 0
