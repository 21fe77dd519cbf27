"""The CLI on a running gateway: the one serving its config, found through that config's discovery file (or
--url), the same output as standalone, no heavy imports on that path; with no gateway, changes wait in the
config's state store."""

from __future__ import annotations

import json
import os
import signal
import socket
import stat
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from onetool.attach import discovery
from onetool.cli._run import names_packs
from onetool.state.paths import project_database
from tests.admin_api import cli, discovered
from tests.conftest import PYTHON, TIME_SERVER
from tests.gateways import ONETOOL, ServedGateway, processes_with, start_http_gateway, stop, write_config
from tests.processes import start_and_read_line

CONFIG = {"servers": {"time": {"command": TIME_SERVER, "args": ["--local-timezone", "UTC"]}}}
NO_SERVERS: dict[str, object] = {"servers": {}}
"""For a test of the gateway's own start and stop, which no server takes part in."""
SNIPPETS = [
    "1 + 1",
    "print('hello'); {'a': [1, '007']}",
    "1 / 0",
    "time.get_current_time(timezone='UTC')['timezone']",
    "undefined_pack.tool()",
    "print('\\x1b]52;c;aGk=\\x07' + chr(0x9b))\nraise ValueError('\\x1b[2J' + chr(0x202e))",
]
WHERE = {
    "x = 1\ny = (2,": "SyntaxError: '(' was never closed (line 2, column 5: y = (2,)",
    "for x in []:\n    pass\nbreak": "SyntaxError: 'break' outside loop (line 3, column 1: break)",
    "x = 1\ntime.get_curent_time(timezone='UTC')": "(line 2, column 1: time.get_curent_time(timezone='UTC'))",
}
"""Both paths say where a snippet's mistake is, by line and column."""


def runtime() -> Path:
    return Path(os.environ["ONETOOL_RUNTIME_DIR"])


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServedGateway, dict[str, str]]]:
    """One gateway on CONFIG for the tests that only read from it, in state and runtime folders of its own; with
    those folders (``served`` points a test at them)."""
    folder = tmp_path_factory.mktemp("attach")
    # In a folder of their own: `cli` runs in the state folder's parent, which has no onetool.yaml.
    folders = {"ONETOOL_STATE_DIR": str(folder / "home" / "state"), "ONETOOL_RUNTIME_DIR": str(folder / "home" / "run")}
    marker = f"cli-{uuid.uuid4().hex}"
    # The marker in its server's environment: what the gateway, or a standalone run on its config, started.
    config = {"servers": {"time": {**CONFIG["servers"]["time"], "env": {"ONETOOL_TEST_MARKER": marker}}}}
    served = start_http_gateway(folder, config, marker, env=folders)
    try:
        yield served, folders
    finally:
        assert stop(served.proc) == 0
    assert processes_with(marker) == []


@pytest.fixture
def served(
    shared: tuple[ServedGateway, dict[str, str]], monkeypatch: pytest.MonkeyPatch
) -> tuple[ServedGateway, Path, int]:
    """The module's gateway, its config file, and how much of its log earlier tests wrote; this test's state and
    runtime folders are the gateway's, so `cli` finds it through its config's discovery file, as a user's would."""
    gateway, folders = shared
    for key, value in folders.items():
        monkeypatch.setenv(key, value)
    return gateway, gateway.log.with_name("onetool.yaml"), gateway.log.stat().st_size


def standalone_run(code: str, config: str, folder: Path) -> subprocess.CompletedProcess[str]:
    """`onetool run -c CODE` with no gateway to attach to: on ``config`` when the snippet uses a pack, else on a
    config with no servers in ``folder`` (a snippet that uses none runs the same on any config; connecting the
    servers it does not use is all the other would add)."""
    if not names_packs(code):
        config = str(write_config(folder, NO_SERVERS))
    return cli("run", "--config", config, "-c", code, env={"ONETOOL_RUNTIME_DIR": str(folder / "none")})


def runs_logged(served: tuple[ServedGateway, Path, int]) -> int:
    """How many runs the module's gateway logged during this test."""
    gateway, _, before = served
    return gateway.log.read_bytes()[before:].decode().count("span=run ")


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_the_discovery_file_is_private_and_removed_on_exit(tmp_path: Path, signum: signal.Signals) -> None:
    served = start_http_gateway(tmp_path, NO_SERVERS, f"cli-{uuid.uuid4().hex}")
    path = discovery.discovery_file(tmp_path / "onetool.yaml")
    try:
        record = discovered()
        assert record["url"] == served.url and record["pid"] == served.proc.pid and len(record["admin_token"]) >= 40
        assert record["config"] == str(tmp_path / "onetool.yaml")
        assert stat.S_IMODE(path.stat().st_mode) == 0o600 and stat.S_IMODE(runtime().stat().st_mode) == 0o700
    finally:
        served.proc.send_signal(signum)
        assert served.proc.wait(15) == 0
        assert served.proc.stdout is not None
        served.proc.stdout.close()
    assert not path.exists()


def test_run_attached_prints_what_standalone_prints(served: tuple[ServedGateway, Path, int], tmp_path: Path) -> None:
    gateway, path, _ = served
    config = str(path)
    for code in SNIPPETS:
        attached = cli("run", "--config", config, "-c", code)
        standalone = standalone_run(code, config, tmp_path)
        assert (attached.returncode, attached.stdout, attached.stderr) == (
            standalone.returncode,
            standalone.stdout,
            standalone.stderr,
        ), code
        assert not [c for c in "\x1b\x07\x9b\u202e" if c in attached.stdout + attached.stderr], code
    assert runs_logged(served) == len(SNIPPETS)
    exact = cli("run", "--config", config, "--json", "-c", SNIPPETS[-1])
    assert exact.returncode == 1 and exact.stdout.isascii()
    assert json.loads(exact.stdout)["structuredContent"]["output"] == "\x1b]52;c;aGk=\x07\x9b\n"
    # Given by URL and token, from anywhere.
    elsewhere = {"ONETOOL_RUNTIME_DIR": str(tmp_path / "none")}
    by_url = cli("run", "--url", gateway.url, "--token", discovered()["admin_token"], "-c", "6 * 7", env=elsewhere)
    assert (by_url.returncode, by_url.stdout) == (0, "42\n")
    no_token = cli("run", "--url", gateway.url, "-c", "1", env=elsewhere)
    assert no_token.returncode == 2 and "no admin token" in no_token.stderr
    # Or by $ONETOOL_URL (after --url, before the discovery file), with $ONETOOL_ADMIN_TOKEN.
    by_env = {**elsewhere, "ONETOOL_URL": gateway.url, "ONETOOL_ADMIN_TOKEN": discovered()["admin_token"]}
    assert cli("run", "-c", "6 * 7", env=by_env).stdout == "42\n"
    listed = cli("servers", env=by_env)
    assert listed.returncode == 0 and "time" in listed.stdout, listed.stderr
    dead_env = {**by_env, "ONETOOL_URL": "http://127.0.0.1:9"}
    assert cli("run", "--url", gateway.url, "-c", "6 * 7", env=dead_env).stdout == "42\n", "--url comes first"


def test_both_run_paths_say_where_a_mistake_is(served: tuple[ServedGateway, Path, int], tmp_path: Path) -> None:
    config = str(served[1])
    for code, where in WHERE.items():
        attached = cli("run", "--config", config, "-c", code)
        standalone = standalone_run(code, config, tmp_path)
        assert attached.returncode == standalone.returncode == 1
        assert where in attached.stderr and where in standalone.stderr, (attached.stderr, standalone.stderr)
    assert runs_logged(served) == len(WHERE)


@pytest.mark.parametrize(("command", "printed"), [(["run", "-c", "1 + 1"], "2\n"), (["tools", "time"], "time (server")])
def test_the_attached_path_imports_nothing_heavy(
    served: tuple[ServedGateway, Path, int], command: list[str], printed: str
) -> None:
    """Nor does it connect a server of its own: `tools` asks the gateway, as `run` does."""
    config = str(served[1])
    probe = (
        f"import sys; from onetool.cli import main; status = main([*{command!r}, '--config', {config!r}]); "
        "print(status, sorted({'.'.join(m.split('.')[:2]) for m in sys.modules}"
        " & {'mcp', 'pydantic', 'anyio', 'sandbox.host', 'sandbox.worker'}))"
    )
    proc = subprocess.run([PYTHON, "-c", probe], capture_output=True, text=True, timeout=30)
    assert proc.stdout.startswith(printed) and proc.stdout.endswith("\n0 []\n"), proc.stderr


def test_tools_attached_prints_what_standalone_prints(served: tuple[ServedGateway, Path, int], tmp_path: Path) -> None:
    """Every pack, then one server's or pack's: the standalone listing of every pack is the attached one, and each
    one asked for is its block of it (both paths pick it with the same code, from what the listing shows)."""
    gateway, path, _ = served
    config = str(path)
    elsewhere = {"ONETOOL_RUNTIME_DIR": str(tmp_path / "none")}
    standalone = cli("tools", "--config", config, env=elsewhere)
    assert standalone.returncode == 0 and standalone.stderr == "", standalone.stderr
    blocks: dict[str, str] = {}
    for line in standalone.stdout.splitlines(keepends=True):
        if not line.startswith(" "):
            head = line.split()[0]
        blocks[head] = blocks.get(head, "") + line
    for server, first in (([], "proxy (local)"), (["time"], "time (server time)"), (["proxy"], "proxy (local)")):
        attached = cli("tools", *server, "--config", config)
        assert attached.returncode == 0 and attached.stderr == "", attached.stderr
        assert attached.stdout == (blocks[server[0]] if server else standalone.stdout)
        assert attached.stdout.splitlines()[0] == first
    assert list(blocks) == ["proxy", "time"]
    listed = cli("tools", "--config", config).stdout.splitlines()
    assert any(line.startswith("  time.get_current_time(timezone: str) -> {") for line in listed), listed
    # Given by URL and token, from a folder without a config: the gateway's packs, not this folder's (none).
    by_url = cli("tools", "time", "--url", gateway.url, "--token", discovered()["admin_token"], env=elsewhere)
    assert by_url.returncode == 0 and by_url.stdout.startswith("time (server time)\n"), by_url.stderr
    unknown = cli("tools", "nope", "--config", config)
    assert (unknown.returncode, unknown.stderr) == (
        2,
        "onetool tools: unknown server or pack 'nope'; packs: proxy, time\n",
    )


def test_a_stale_or_dead_gateway_means_standalone(tmp_path: Path) -> None:
    write_config(tmp_path, CONFIG)
    config = str(tmp_path / "onetool.yaml")
    published = discovery.discovery_file(Path(config))
    published.parent.mkdir(parents=True, mode=0o700)
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        closed = s.getsockname()[1]
    dead = subprocess.Popen(["true"])
    dead.wait()
    for pid in (dead.pid, os.getpid()):  # a dead pid; a live one whose URL refuses connections
        record = {
            "url": f"http://127.0.0.1:{closed}/mcp",
            "pid": pid,
            "admin_token": "t",
            "started_at": "2026-01-01T00:00:00+00:00",
            "version": "0",
        }
        published.write_text(json.dumps(record))
        proc = cli("run", "--config", config, "-c", "time.get_current_time(timezone='UTC')['timezone']")
        assert (proc.returncode, proc.stdout) == (0, "UTC\n"), proc.stderr


def test_changes_without_a_gateway_wait_for_it(tmp_path: Path) -> None:
    config = str(write_config(tmp_path, CONFIG))
    disabled = cli("servers", "disable", "time", "--config", config)
    assert (disabled.returncode, disabled.stdout) == (0, "disabled server 'time'; applies when the gateway starts\n")
    added = cli("servers", "add", "extra", "--config", config, "--", TIME_SERVER)
    assert added.returncode == 0 and "applies when the gateway starts" in added.stdout
    approve = cli("servers", "approve", "time", "--config", config)
    assert approve.returncode == 1 and "no gateway is running" in approve.stderr
    unknown = cli("servers", "enable", "nope", "--config", config)
    assert unknown.returncode == 2 and "unknown server 'nope'; servers: extra, time" in unknown.stderr

    served = start_http_gateway(tmp_path, CONFIG, f"cli-{uuid.uuid4().hex}")
    try:
        table = cli("servers")
        assert table.returncode == 0, table.stderr
        rows = {line.split()[0]: line.split() for line in table.stdout.splitlines()[1:]}
        assert rows["time"][3] == "disabled" and rows["extra"][3] == "connected" and rows["extra"][7] == "cli"
        shown = json.loads(cli("servers", "show", "extra", "--json").stdout)
        assert shown["added_by"] == "cli" and {t["name"] for t in shown["tools"]} == {
            "get_current_time",
            "convert_time",
        }
        enabled = cli("servers", "enable", "time")
        assert enabled.returncode == 0 and "connected" in enabled.stdout
        assert cli("servers", "remove", "extra").stdout == "removed server 'extra'\n"
        assert [s["name"] for s in json.loads(cli("servers", "--json").stdout)] == ["time"]
    finally:
        assert stop(served.proc) == 0


def test_a_corrupt_state_store_stops_serve_with_status_2(tmp_path: Path) -> None:
    config = write_config(tmp_path, CONFIG)
    store = project_database(config)
    store.parent.mkdir(parents=True)
    store.write_text("not a database")
    proc = cli("serve", "--http", "--port", "0", "--config", str(config))
    assert proc.returncode == 2 and "file is not a database" in proc.stderr and "Traceback" not in proc.stderr
    assert store.read_text() == "not a database"


def test_serve_prints_the_url_once(tmp_path: Path) -> None:
    """On stdout, for scripts; the log (here on stderr, as under `make run`) does not repeat it."""
    errors = tmp_path / "serve.stderr"
    command = [ONETOOL, "serve", "--http", "--port", "0", "--config", str(write_config(tmp_path, NO_SERVERS))]
    proc, url = start_and_read_line(command, stderr=errors)
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=15)
    err = errors.read_text()
    assert proc.returncode == 0 and url.startswith("http://127.0.0.1:") and url.endswith("/mcp")
    assert (url + "\n" + out + err).count(url) == 1, err
