"""Two projects side by side, each with its config file and its gateway: each has its own state store and
discovery file, so a server added or disabled in one never reaches the other; the CLI talks to the gateway of its
config, says so when it attaches to another, and `onetool status` lists both."""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from onetool import discovery
from onetool.state.paths import project_database, state_dir
from tests.admin_api import cli
from tests.conftest import TIME_SERVER
from tests.gateways import ServedGateway, start_http_gateway, stop, write_config

CONFIG = {"servers": {"time": {"command": TIME_SERVER, "args": ["--local-timezone", "UTC"]}}}


def servers(config: Path) -> dict[str, dict[str, object]]:
    listed = cli("servers", "--json", "--config", str(config))
    assert listed.returncode == 0, listed.stderr
    return {s["name"]: s for s in json.loads(listed.stdout)}


@pytest.fixture
def projects(tmp_path: Path) -> Iterator[tuple[Path, Path]]:
    """Two project folders, `a` and `b`, each with the same onetool.yaml."""
    folders = tmp_path / "a", tmp_path / "b"
    for folder in folders:
        folder.mkdir()
        write_config(folder, CONFIG)
    yield folders[0] / "onetool.yaml", folders[1] / "onetool.yaml"


def test_changes_made_without_a_gateway_stay_in_their_project(projects: tuple[Path, Path]) -> None:
    a, b = projects
    added = cli("servers", "add", "extra", "--config", str(a), "--", TIME_SERVER)
    assert added.returncode == 0, added.stderr
    assert cli("servers", "disable", "time", "--config", str(a)).returncode == 0
    assert project_database(a).is_file() and project_database(a) != project_database(b)
    assert not project_database(b).exists()
    gateways = [start_http_gateway(config.parent, CONFIG, f"proj-{uuid.uuid4().hex}") for config in (a, b)]
    try:
        in_a, in_b = servers(a), servers(b)
        assert set(in_a) == {"time", "extra"} and in_a["time"]["status"] == "disabled"
        assert set(in_b) == {"time"} and in_b["time"]["status"] == "connected"
    finally:
        for served in gateways:
            assert stop(served.proc) == 0


@pytest.fixture
def running(projects: tuple[Path, Path]) -> Iterator[tuple[ServedGateway, ServedGateway]]:
    a, b = projects
    started = [start_http_gateway(config.parent, CONFIG, f"proj-{uuid.uuid4().hex}") for config in (a, b)]
    try:
        yield started[0], started[1]
    finally:
        for served in started:
            assert stop(served.proc) == 0


def test_the_cli_talks_to_the_gateway_of_its_config(
    projects: tuple[Path, Path], running: tuple[ServedGateway, ServedGateway]
) -> None:
    a, b = projects
    gateway_a, gateway_b = running
    # A change through the CLI in project a reaches a's gateway only.
    assert cli("servers", "add", "extra", "--config", str(a), "--", TIME_SERVER).returncode == 0
    assert cli("servers", "disable", "time", "--config", str(a)).returncode == 0
    assert set(servers(a)) == {"time", "extra"} and servers(a)["time"]["status"] == "disabled"
    assert set(servers(b)) == {"time"} and servers(b)["time"]["status"] == "connected"
    # In a project's folder, its ./onetool.yaml names the gateway.
    here = cli("run", "-c", "time.get_current_time(timezone='UTC')['timezone']", cwd=b.parent)
    assert (here.returncode, here.stdout, here.stderr) == (0, "UTC\n", "")
    assert gateway_b.log.read_text().count("span=run ") == 1 and "span=run " not in gateway_a.log.read_text()
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
    assert gateway_b.log.read_text().count("span=run ") == 1 and "span=run " not in gateway_a.log.read_text()
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


def test_with_no_config_the_only_gateway_running_is_used_and_named(tmp_path: Path) -> None:
    assert cli("status").stdout.startswith("no gateway is running")
    served = start_http_gateway(tmp_path, CONFIG, f"proj-{uuid.uuid4().hex}")
    try:
        ran = cli("run", "-c", "6 * 7")
        assert ran.returncode == 0 and ran.stdout == "42\n"
        note = f"onetool: attached to the only gateway running, {served.url}, which serves {tmp_path / 'onetool.yaml'}"
        assert ran.stderr.strip() == note
    finally:
        assert stop(served.proc) == 0


def test_state_dir_puts_a_projects_store_where_it_says_and_the_old_shared_store_is_pointed_out(tmp_path: Path) -> None:
    legacy = state_dir() / "onetool.db"
    legacy.parent.mkdir(parents=True, exist_ok=True)
    legacy.write_bytes(b"")  # the store every project shared before
    served = start_http_gateway(tmp_path, {**CONFIG, "state": {"dir": "state"}}, f"proj-{uuid.uuid4().hex}")
    try:
        assert (tmp_path / "state" / "onetool.db").is_file()
        assert f"{legacy} holds the state every project shared" in served.log.read_text()
        assert f"cp {legacy} {tmp_path / 'state' / 'onetool.db'}" in served.log.read_text()
    finally:
        assert stop(served.proc) == 0
    assert os.stat(tmp_path / "state").st_mode & 0o777 == 0o700
