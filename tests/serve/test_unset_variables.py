"""An enabled server whose entry names a variable that is not set fails alone, as a desktop client would have it: the
others serve, it shows as failed naming the variable (never a value of the entry), and `onetool check` exits 2."""

from __future__ import annotations

import json
import os
from pathlib import Path

from tests.admin_api import cli
from tests.conftest import TIME_SERVER
from tests.gateways import start_http_gateway, stop, text_of

UNSET = "ONETOOL_TEST_UNSET_GH_TOKEN"
SECRET = "s3cret-value-of-the-entry"
CONFIG = {
    "servers": {
        "time": {"command": TIME_SERVER, "args": ["--local-timezone", "UTC"]},
        "gh": {"command": TIME_SERVER, "env": {"GH_TOKEN": f"${{{UNSET}}}", "OTHER": "${ONETOOL_TEST_SET_SECRET}"}},
    }
}
FAILURE = f"environment variable {UNSET} is not set"
FIX = "set it where OneTool starts, and start it again"


async def test_a_server_whose_variable_is_unset_fails_alone(tmp_path: Path) -> None:
    assert UNSET not in os.environ
    served = start_http_gateway(tmp_path, CONFIG, "unset", env={"ONETOOL_TEST_SET_SECRET": SECRET})
    try:
        ok = await served.run("time.get_current_time(timezone='UTC')['timezone']")
        assert (ok.is_error, text_of(ok)) == (False, "UTC")
        failed = await served.run("gh.get_current_time(timezone='UTC')")
        assert failed.is_error
        assert f"server 'gh' is unavailable: {FAILURE}; {FIX}" in text_of(failed)

        listed = cli("servers", "--json", "--config", str(tmp_path / "onetool.yaml"))
        assert listed.returncode == 0, listed.stderr
        views = {v["name"]: v for v in json.loads(listed.stdout)}
        assert (views["time"]["status"], views["gh"]["status"]) == ("connected", "failed")
        assert (views["gh"]["error"], views["gh"]["fix"]) == (FAILURE, FIX)
        assert SECRET not in listed.stdout
    finally:
        assert stop(served.proc) == 0
    log = served.log.read_text()
    assert f"servers.gh.env.GH_TOKEN: environment variable {UNSET} is not set; server 'gh' fails" in log
    assert SECRET not in log


def test_check_exits_2_for_it_and_tries_the_others(tmp_path: Path) -> None:
    config = tmp_path / "onetool.yaml"
    config.write_text(json.dumps(CONFIG))
    env = {"ONETOOL_TEST_SET_SECRET": SECRET}
    tried = "  ok      time: 2 tools"
    for options, time_line in (([], tried), (["--no-connect"], "  -       time: not tried (stdio)")):
        done = cli("check", *options, "--config", str(config), env=env)
        assert done.returncode == 2, done
        lines = done.stdout.splitlines()
        assert any(line.startswith(time_line) for line in lines), done.stdout
        assert f"  FAILED  gh: {FAILURE} - {FIX}" in lines
        assert SECRET not in done.stdout + done.stderr
