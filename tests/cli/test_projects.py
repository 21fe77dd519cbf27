"""Two projects side by side, each with its config file and its gateway: each has its own state store and
discovery file, so a server added or disabled in one never reaches the other; the CLI talks to the gateway of its
config, says so when it attaches to another, and `onetool status` lists both."""

from __future__ import annotations

import json
import os
import subprocess
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from onetool.attach import discovery
from onetool.state.paths import project_database, state_dir
from tests.admin_api import cli
from tests.conftest import EVERYTHING_JS, TIME_SERVER
from tests.gateways import ServedGateway, processes_with, start_http_gateway, stop, write_config

CONFIG = {"servers": {"time": {"command": TIME_SERVER, "args": ["--local-timezone", "UTC"]}}}


def servers(config: Path) -> dict[str, dict[str, object]]:
    listed = cli("servers", "--json", "--config", str(config))
    assert listed.returncode == 0, listed.stderr
    return {s["name"]: s for s in json.loads(listed.stdout)}


def folders_of(folder: Path) -> dict[str, str]:
    """State and runtime folders of a module fixture's own, under ``folder``."""
    return {"ONETOOL_STATE_DIR": str(folder / "state"), "ONETOOL_RUNTIME_DIR": str(folder / "run")}


@dataclass
class Projects:
    """Projects `a` and `b`, each a folder with the same onetool.yaml, in state and runtime folders of the
    module's own; what was changed in `a` before any gateway ran, and what the stores looked like then; then each
    project's gateway."""

    a: Path
    b: Path
    folders: dict[str, str]
    changed: list[subprocess.CompletedProcess[str]]
    stores_before: tuple[bool, bool, bool]
    gateways: tuple[ServedGateway, ServedGateway]


@pytest.fixture(scope="module")
def both(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Projects]:
    root = tmp_path_factory.mktemp("projects")
    folders = folders_of(root)
    a, b = root / "a" / "onetool.yaml", root / "b" / "onetool.yaml"
    for config in (a, b):
        config.parent.mkdir()
        write_config(config.parent, CONFIG)
    # With no gateway running: a server added to a, and a's time disabled.
    changed = [
        cli("servers", "add", "extra", "--config", str(a), "--", TIME_SERVER, env=folders),
        cli("servers", "disable", "time", "--config", str(a), env=folders),
    ]
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ONETOOL_STATE_DIR", folders["ONETOOL_STATE_DIR"])
        stores = project_database(a).is_file(), project_database(a) != project_database(b), project_database(b).exists()
    marker = f"proj-{uuid.uuid4().hex}"
    marked = {"servers": {"time": {**CONFIG["servers"]["time"], "env": {"ONETOOL_TEST_MARKER": marker}}}}
    started: list[ServedGateway] = []
    try:
        for config in (a, b):
            started.append(start_http_gateway(config.parent, marked, marker, env=folders))
        yield Projects(a, b, folders, changed, stores, (started[0], started[1]))
    finally:
        for served in started:
            assert stop(served.proc) == 0
    assert processes_with(marker) == []


@pytest.fixture
def projects(both: Projects, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    """The module's two project configs; this test's state and runtime folders are the module's, where their
    gateways run."""
    for key, value in both.folders.items():
        monkeypatch.setenv(key, value)
    return both.a, both.b


@pytest.fixture
def running(both: Projects, projects: tuple[Path, Path]) -> tuple[ServedGateway, ServedGateway]:
    return both.gateways


def test_changes_made_without_a_gateway_stay_in_their_project(both: Projects, projects: tuple[Path, Path]) -> None:
    """The module's projects: a server added to `a` and its time disabled before either gateway started."""
    a, b = projects
    added, disabled = both.changed
    assert added.returncode == 0, added.stderr
    assert disabled.returncode == 0, disabled.stderr
    # a's store held them, b had none, before the gateways started.
    assert both.stores_before == (True, True, False)
    in_a, in_b = servers(a), servers(b)
    assert set(in_a) == {"time", "extra"} and in_a["time"]["status"] == "disabled"
    assert set(in_b) == {"time"} and in_b["time"]["status"] == "connected"


def runs_in(served: ServedGateway, after: int) -> int:
    """How many runs ``served`` logged past the first ``after`` bytes of its log."""
    return served.log.read_bytes()[after:].decode().count("span=run ")


def test_the_cli_talks_to_the_gateway_of_its_config(
    projects: tuple[Path, Path], running: tuple[ServedGateway, ServedGateway]
) -> None:
    a, b = projects
    gateway_a, gateway_b = running
    logged = gateway_a.log.stat().st_size, gateway_b.log.stat().st_size
    # A change through the CLI in project a reaches a's gateway only (the server it adds is gone afterwards: the
    # other tests see the module's projects as they were).
    everything = ["node", str(EVERYTHING_JS), "stdio"]
    try:
        assert cli("servers", "add", "more", "--config", str(a), "--", *everything).returncode == 0
        assert servers(a)["more"]["status"] == "connected"
        assert cli("servers", "disable", "more", "--config", str(a)).returncode == 0
        assert set(servers(a)) == {"time", "extra", "more"} and servers(a)["more"]["status"] == "disabled"
        assert set(servers(b)) == {"time"} and servers(b)["time"]["status"] == "connected"
    finally:
        assert cli("servers", "remove", "more", "--config", str(a)).returncode == 0
    # In a project's folder, its ./onetool.yaml names the gateway.
    here = cli("run", "-c", "time.get_current_time(timezone='UTC')['timezone']", cwd=b.parent)
    assert (here.returncode, here.stdout, here.stderr) == (0, "UTC\n", "")
    assert runs_in(gateway_b, logged[1]) == 1 and runs_in(gateway_a, logged[0]) == 0
    # With no config and two gateways, the CLI does not guess which one has the packs a snippet uses.
    lost = cli("run", "-c", "time.get_current_time(timezone='UTC')")
    assert lost.returncode == 2
    assert "no config file here" in lost.stderr and "2 gateways are running" in lost.stderr
    assert gateway_a.url in lost.stderr and gateway_b.url in lost.stderr and "--config FILE or --url URL" in lost.stderr
    assert lost.stderr.endswith("; or run it here, with this folder's servers, with --standalone\n")
    # A snippet that uses no pack needs no gateway: it runs here, in a sandbox of the command's own.
    for code, value in (
        ("6 * 7", "42"),
        ("import json\ntry:\n    x = json.dumps([1])\nexcept ToolError as e:\n    x = e\nx", "[1]"),
    ):
        here = cli("run", "-c", code)
        assert (here.returncode, here.stdout, here.stderr) == (0, f"{value}\n", "")
    # --standalone says so, in a project too: its servers connected here, neither gateway asked.
    alone = cli("run", "--standalone", "-c", "time.get_current_time(timezone='UTC')['timezone']", cwd=b.parent)
    assert (alone.returncode, alone.stdout, alone.stderr) == (0, "UTC\n", "")
    assert runs_in(gateway_b, logged[1]) == 1 and runs_in(gateway_a, logged[0]) == 0
    both = cli("run", "--standalone", "--url", gateway_a.url, "-c", "1")
    assert both.returncode == 2 and "--standalone runs here, on no gateway" in both.stderr


def test_status_lists_every_gateway_with_its_config_and_token(
    projects: tuple[Path, Path], running: tuple[ServedGateway, ServedGateway]
) -> None:
    a, b = projects
    gateway_a, gateway_b = running
    table = cli("status")
    assert table.returncode == 0, table.stderr
    lines = table.stdout.splitlines()
    assert lines[0].split() == ["URL", "CONFIG", "PID", "STARTED", "ADMIN", "TOKEN", "IN"]
    for served, config in ((gateway_a, a), (gateway_b, b)):
        [row] = [line for line in lines if line.startswith(served.url)]
        assert str(config) in row and str(served.proc.pid) in row and str(discovery.discovery_file(config)) in row
    listed = json.loads(cli("status", "--json", "--tokens").stdout)
    assert [(g["url"], g["config"]) for g in listed] == [(gateway_a.url, str(a)), (gateway_b.url, str(b))]
    for record in listed:
        assert record["admin_token"] == json.loads(Path(record["discovery_file"]).read_text())["admin_token"]
    assert "admin_token" not in json.loads(cli("status", "--json").stdout)[0]
    # --config: the one gateway serving that file.
    only_b = json.loads(cli("status", "--json", "--config", str(b)).stdout)
    assert [(g["url"], g["config"]) for g in only_b] == [(gateway_b.url, str(b))]
    one_row = cli("status", "--config", str(a)).stdout.splitlines()
    assert [line for line in one_row if line.startswith("http")] == [
        line for line in lines if line.startswith(gateway_a.url)
    ]
    other = a.parent.parent / "other.yaml"
    none = cli("status", "--config", str(other))
    assert (none.returncode, none.stdout) == (
        0,
        f"no gateway serves {other} (`onetool status` without --config lists every one running)\n",
    )


@pytest.fixture(scope="module")
def lone(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServedGateway, dict[str, str]]]:
    """One gateway alone in its runtime folder, its project's store in the folder `state.dir` names, started where
    the store every project shared before (the state folder's onetool.db) is still there; and its folders."""
    folder = tmp_path_factory.mktemp("lone")
    # Apart from the project's folder: its state.dir is not the state folder, and `cli` (which runs in the state
    # folder's parent) finds no ./onetool.yaml.
    folders = folders_of(folder / "home")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ONETOOL_STATE_DIR", folders["ONETOOL_STATE_DIR"])
        legacy = state_dir() / "onetool.db"
    legacy.parent.mkdir(parents=True, exist_ok=True)
    legacy.write_bytes(b"")  # the store every project shared before
    marker = f"proj-{uuid.uuid4().hex}"
    served = start_http_gateway(folder, {"servers": {}, "state": {"dir": "state"}}, marker, env=folders)
    try:
        yield served, folders
    finally:
        assert stop(served.proc) == 0


@pytest.fixture
def alone(lone: tuple[ServedGateway, dict[str, str]], monkeypatch: pytest.MonkeyPatch) -> tuple[ServedGateway, Path]:
    """The lone gateway and its project folder; this test's state and runtime folders are its."""
    served, folders = lone
    for key, value in folders.items():
        monkeypatch.setenv(key, value)
    return served, served.log.parent


def test_with_no_config_the_only_gateway_running_is_used_and_named(
    alone: tuple[ServedGateway, Path], tmp_path: Path
) -> None:
    assert cli("status", env={"ONETOOL_RUNTIME_DIR": str(tmp_path / "none")}).stdout.startswith("no gateway is running")
    served, folder = alone
    ran = cli("run", "-c", "6 * 7")
    assert ran.returncode == 0 and ran.stdout == "42\n"
    note = f"onetool: attached to the only gateway running, {served.url}, which serves {folder / 'onetool.yaml'}"
    assert ran.stderr.strip() == note


def test_state_dir_puts_a_projects_store_where_it_says_and_the_old_shared_store_is_pointed_out(
    alone: tuple[ServedGateway, Path],
) -> None:
    served, folder = alone
    legacy = state_dir() / "onetool.db"
    assert legacy.is_file()
    assert (folder / "state" / "onetool.db").is_file()
    assert f"{legacy} holds the state every project shared" in served.log.read_text()
    assert f"cp {legacy} {folder / 'state' / 'onetool.db'}" in served.log.read_text()
    assert os.stat(folder / "state").st_mode & 0o777 == 0o700
