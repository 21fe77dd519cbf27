"""A config that would start OneTool as its own upstream: refused when loaded when it says so plainly, and at run
time (the child gateway refuses to start) when it does not; either way no gateway starts another of itself."""

from __future__ import annotations

import sys
import uuid
from pathlib import Path

import pytest

from tests.admin_api import cli
from tests.gateways import ONETOOL, get, processes_with, start_http_gateway, stop, until, write_config


@pytest.mark.parametrize(
    "server",
    [
        {"command": ONETOOL, "args": ["serve"]},
        {"command": "onetool", "args": ["serve", "--config", "onetool.yaml"]},
        {"command": sys.executable, "args": ["-m", "onetool", "serve", "--config=./onetool.yaml"]},
        {"command": "uvx", "args": ["onetool", "serve"], "env": {"ONETOOL_CONFIG": "onetool.yaml"}},
    ],
)
def test_a_config_that_serves_itself_is_refused(tmp_path: Path, server: dict[str, object]) -> None:
    config = write_config(tmp_path, {"servers": {"me": server}})
    for command in (["check"], ["serve", "--http", "--port", "0"]):
        done = cli(*command, "--config", str(config))
        assert done.returncode == 2, done
        assert f"{config}: servers.me runs OneTool on this same config" in done.stderr
        assert "a gateway cannot be its own upstream" in done.stderr


def test_another_config_may_be_an_upstream(tmp_path: Path) -> None:
    """The load-time check passes it (`--no-connect`: what is checked is the file, not the inner gateway)."""
    (tmp_path / "inner").mkdir()
    write_config(tmp_path / "inner", {})
    config = write_config(
        tmp_path, {"servers": {"inner": {"command": ONETOOL, "args": ["serve", "--config", "inner/onetool.yaml"]}}}
    )
    done = cli("check", "--no-connect", "--config", str(config))
    assert "runs OneTool on this same config" not in done.stderr
    assert done.returncode == 0 and "  -       inner: not tried (stdio)" in done.stdout.splitlines(), done


def test_at_run_time_a_gateway_started_by_one_of_its_own_config_refuses_to_start(tmp_path: Path) -> None:
    marker = f"recursion-{uuid.uuid4().hex}"
    config = tmp_path / "onetool.yaml"
    # Hidden from the load-time check behind a shell: only the runtime guard can see it.
    hidden = {"command": "sh", "args": ["-c", f"exec {ONETOOL} serve --config {config}"], "env": {"MARK": marker}}
    served = start_http_gateway(tmp_path, {"servers": {"me": hidden}}, marker)
    try:
        status = until(
            lambda: (body := get(served.url, "/status", "")[1]) and body["servers"][0]["status"] == "failed" and body
        )
        assert status["servers"][0]["name"] == "me"
        log = served.log.read_text()
        assert "was started as an upstream server of a gateway of the same config" in log
        assert processes_with(marker) == []  # the refused child is gone, and it started nothing
    finally:
        assert stop(served.proc) == 0
