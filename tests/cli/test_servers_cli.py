"""`onetool servers ...` as a developer types it: `add NAME [options] -- COMMAND ARGS...` (the command's own options,
such as `-y`, stay its own) or `--url URL`, `edit NAME` changing only what it is given, on a running gateway or
into the store when none runs; every action honours --json; HELD and ADDED BY say what they mean."""

from __future__ import annotations

import json
import re
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from onetool.config import load_config
from onetool.state import StateStore
from tests.admin_api import cli
from tests.conftest import EVERYTHING_JS, TIME_SERVER
from tests.gateways import ServedGateway, start_http_gateway, stop, write_config

EVERYTHING = ["node", str(EVERYTHING_JS), "stdio"]
CONFIG = {
    "servers": {
        "time": {"command": TIME_SERVER, "args": ["--local-timezone", "UTC"], "quarantined": True},
        "idle": {"command": TIME_SERVER, "env": {"T": "${ONETOOL_TEST_IDLE_TOKEN}"}, "enabled": False},
    }
}


class Attached:
    """The module's gateway, with state and runtime folders of its own, and the CLI pointed at it."""

    def __init__(self, served: ServedGateway, folders: dict[str, str]) -> None:
        self.served, self.folders = served, folders

    def __call__(self, *args: str) -> subprocess.CompletedProcess[str]:
        # The gateway's config names it: the CLI talks to the gateway serving its config.
        config = str(Path(self.served.log).parent / "onetool.yaml")
        return cli(*args, env={**self.folders, "ONETOOL_CONFIG": config})


@pytest.fixture(scope="module")
def attached(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Attached]:
    folder = tmp_path_factory.mktemp("servers-cli")
    folders = {"ONETOOL_STATE_DIR": str(folder / "state"), "ONETOOL_RUNTIME_DIR": str(folder / "run")}
    served = start_http_gateway(folder, CONFIG, f"srv-{uuid.uuid4().hex}", env=folders)
    try:
        yield Attached(served, folders)
    finally:
        assert stop(served.proc) == 0


def rows(table: str) -> dict[str, dict[str, str]]:
    """`onetool servers`' table by server name, each row by column (columns start after two spaces or more; a cell
    may be empty)."""
    head, *lines = table.splitlines()
    starts = [0, *(m.end() for m in re.finditer("  +", head))]
    spans = list(zip(starts, [*starts[1:], None], strict=True))
    columns = [head[a:b].strip() for a, b in spans]
    found = {}
    for line in lines:
        if not line.strip():
            break  # what follows the table (a proposal's launch line)
        cells = [line[a:b].strip() for a, b in spans]
        found[cells[0]] = dict(zip(columns, cells, strict=True))
    return found


def test_add_edit_and_remove_on_the_running_gateway(attached: Attached) -> None:
    added = attached("servers", "add", "ev", "--timeout", "5", "--env", "MARK=1", "--", *EVERYTHING)
    assert added.returncode == 0, added.stderr
    row = rows(added.stdout)["ev"]
    assert (row["STATUS"], row["HELD"], row["ADDED BY"]) == ("connected", "0", "cli") and int(row["TOOLS"]) > 10
    assert attached("run", "-c", "ev.get_env()['MARK']").stdout == "1\n"

    edited = attached("servers", "edit", "ev", "--env", "MARK=2", "--env", "MORE=x", "--json")
    assert edited.returncode == 0, edited.stderr
    view = json.loads(edited.stdout)
    assert (view["name"], view["status"], view["added_by"]) == ("ev", "connected", "cli")
    # Restarted with the new entry; what the edit did not name (the command, the timeout) stays.
    assert attached("run", "-c", "e = ev.get_env(); [e['MARK'], e['MORE']]").stdout == '["2","x"]\n'
    assert attached("servers", "edit", "ev", "--unset-env", "MORE").returncode == 0
    assert attached("run", "-c", "'MORE' in ev.get_env()").stdout == "false\n"

    refused = attached("servers", "edit", "time", "--timeout", "5")
    assert refused.returncode == 1 and refused.stdout == ""
    config = Path(attached.served.log).with_name("onetool.yaml")
    assert refused.stderr == (
        f"onetool servers: server 'time' comes from the config file {config}: edit it in the file, then `onetool "
        "reload` (or SIGHUP to the gateway); with `watch: true` in the file, a save applies at once\n"
    )
    bad = attached("servers", "edit", "ev", "--timeout", "0")
    assert bad.returncode == 2
    assert "server 'ev': invalid configuration: servers.ev.timeout: Input should be greater than 0" in bad.stderr
    unknown = attached("servers", "edit", "nope", "--timeout", "1")
    assert unknown.returncode == 2 and "unknown server 'nope'" in unknown.stderr

    removed = attached("servers", "remove", "ev", "--json")
    assert (removed.returncode, json.loads(removed.stdout)) == (0, {"removed": "ev"})


def test_every_action_honours_json_before_or_after_it(attached: Attached) -> None:
    def data(*args: str) -> Any:
        proc = attached("servers", *args)
        assert proc.returncode == 0, (args, proc.stderr)
        return json.loads(proc.stdout)

    assert data("--json", "add", "js", "--quarantined", "--", *EVERYTHING)["quarantined"] is True
    assert data("approve", "js", "--json")["status"] == "connected"
    assert data("--json", "disable", "js")["status"] == "disabled"
    assert data("enable", "js", "--json")["status"] == "connected"
    assert data("restart", "js", "--json")["status"] == "connected"
    assert data("quarantine", "--json", "js")["status"] == "quarantined"
    assert data("show", "js", "--json")["tools"]
    assert data("--json", "show", "js")["name"] == "js"
    assert "js" in [s["name"] for s in data("--json")]
    assert data("--json", "remove", "js") == {"removed": "js"}


def test_held_counts_what_no_face_shows_and_a_config_server_was_added_by_config(attached: Attached) -> None:
    table = attached("servers")
    assert table.returncode == 0, table.stderr
    row = rows(table.stdout)["time"]
    assert (row["STATUS"], row["TOOLS"], row["HELD"], row["ADDED BY"]) == ("quarantined", "2", "2", "config")
    views = {v["name"]: v for v in json.loads(attached("servers", "--json").stdout)}
    assert views["time"]["held_tools"] == ["convert_time", "get_current_time"]
    assert views["time"]["added_by"] == views["idle"]["added_by"] == "config"


def test_a_server_whose_variable_was_unset_cannot_be_enabled(attached: Attached) -> None:
    proc = attached("servers", "enable", "idle")
    assert proc.returncode == 1
    assert proc.stderr == (
        "onetool servers: server 'idle' cannot be enabled: its entry uses ONETOOL_TEST_IDLE_TOKEN, not set when the "
        "config was read; set it and restart the gateway\n"
    )


# ----- no gateway: the changes wait in the store ------------------------------------------------------------


def stored(name: str, config: str) -> dict[str, Any]:
    """The spec of an added server, as the store of ``config`` keeps it."""

    async def read() -> dict[str, Any]:
        async with await StateStore.open(load_config(config).store_url) as store:
            return (await store.added_servers())[name].spec

    return anyio.run(read)


def test_add_and_edit_with_no_gateway_wait_in_the_store(tmp_path: Path) -> None:
    config = str(write_config(tmp_path, {"servers": {"time": {"command": TIME_SERVER}}}))
    # `--local-timezone` is the server's own option: after --, argparse leaves it alone.
    added = cli("servers", "add", "x", "--config", config, "--", TIME_SERVER, "--local-timezone", "UTC")
    assert (added.returncode, added.stdout) == (0, "added server 'x'; applies when the gateway starts\n"), added.stderr
    assert stored("x", config) == {"command": TIME_SERVER, "args": ["--local-timezone", "UTC"]}

    edited = cli(
        "servers", "edit", "x", "--timeout", "7", "--env", "A=1", "--cwd", "sub", "--config", config, cwd=tmp_path
    )
    assert edited.stdout == "edited server 'x' (cwd, env, timeout); applies when the gateway starts\n", edited.stderr
    assert stored("x", config) == {
        "command": TIME_SERVER,
        "args": ["--local-timezone", "UTC"],
        "timeout": 7.0,
        "env": {"A": "1"},
        "cwd": str(tmp_path / "sub"),  # as the shell it was typed in means it: the gateway runs elsewhere
    }
    again = cli("servers", "--json", "edit", "x", "--timeout", "7", "--config", config)
    assert json.loads(again.stdout) == {
        "server": "x",
        "action": "edit",
        "pending": True,
        "message": "nothing to change: server 'x' already has these settings",
    }
    # A new URL makes it an HTTP server: the stdio keys go, the rest stays.
    http = cli("servers", "edit", "x", "--url", "http://127.0.0.1:9/mcp", "--type", "sse", "--config", config)
    assert http.returncode == 0, http.stderr
    assert stored("x", config) == {"url": "http://127.0.0.1:9/mcp", "type": "sse", "timeout": 7.0}

    refused = cli("servers", "edit", "time", "--timeout", "1", "--config", config)
    assert refused.returncode == 1 and refused.stderr == (
        f"onetool servers: server 'time' comes from the config file {config}: edit it in the file; the gateway reads "
        "it when it starts\n"
    )

    async def convert() -> None:
        async with await StateStore.open(load_config(config).store_url) as store:
            await store.record_conversion("x", command="c", args=[], env={}, url="http://b:9001/mcp", actor="cli")

    anyio.run(convert)
    converted = cli("servers", "edit", "x", "--timeout", "1", "--config", config)
    assert converted.returncode == 1
    assert "server 'x' is converted (the bridge serves it at http://b:9001/mcp): revert it first" in converted.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--command", "npx", "--arg", "-y"],
            "onetool servers add: error: --command is gone: give the command and its arguments last, after --: "
            "onetool servers add NAME [options] (-- COMMAND [ARGS...] | --url URL)",
        ),
        (
            ["npx", "-y", "@wix/mcp"],
            "onetool: error: unrecognized arguments: npx -y @wix/mcp; a stdio server's command and its arguments go "
            "last, after --: onetool servers add NAME [options] (-- COMMAND [ARGS...] | --url URL)",
        ),
        (["--timout", "3", "--", "npx"], "onetool: error: unrecognized arguments: --timout 3"),
        (["--env", "NOVALUE", "--", "npx"], "onetool: --env 'NOVALUE': expected KEY=VALUE"),
        (["--type", "ws", "--", "npx"], "argument --type: invalid choice: 'ws' (choose from 'stdio', 'http', 'sse')"),
        (["--timeout", "1"], "servers.x: give 'command' (a stdio server) or 'url' (an HTTP server)"),
        (["--type", "sse", "--", "npx"], "servers.x: type: sse cannot be used with a stdio ('command') server"),
        (["--url", "http://h/mcp", "--", "npx"], "give either 'command' (a stdio server) or 'url' (an HTTP server)"),
    ],
)
def test_a_wrong_add_says_what_to_type(tmp_path: Path, args: list[str], message: str) -> None:
    proc = cli("servers", "add", "x", *args, "--config", str(write_config(tmp_path, {})))
    assert proc.returncode == 2 and proc.stdout == ""
    assert message in proc.stderr, proc.stderr


def test_an_edit_that_gives_nothing_to_change_says_so(tmp_path: Path) -> None:
    proc = cli("servers", "edit", "x", "--config", str(write_config(tmp_path, {})))
    assert (proc.returncode, proc.stdout) == (2, "")
    assert proc.stderr == (
        "onetool servers edit: nothing to change: give an option (--timeout 30, --env K=V ...) or "
        "-- COMMAND [ARGS...]\n"
    )


def test_a_plain_http_url_to_another_host_needs_allow_http(tmp_path: Path) -> None:
    config = str(write_config(tmp_path, {}))
    refused = cli("servers", "add", "remote", "--url", "http://10.1.2.3/mcp", "--config", config)
    assert refused.returncode == 2 and "set allow_http: true if the network to it is trusted" in refused.stderr
    allowed = cli("servers", "add", "remote", "--url", "http://10.1.2.3/mcp", "--allow-http", "--config", config)
    assert allowed.returncode == 0, allowed.stderr
    assert stored("remote", config) == {"url": "http://10.1.2.3/mcp", "allow_http": True}


def test_add_and_edit_take_the_tools_filter(tmp_path: Path) -> None:
    config = str(write_config(tmp_path, {}))
    added = cli("servers", "add", "t", "--deny", "convert_*", "--config", config, "--", TIME_SERVER)
    assert added.returncode == 0, added.stderr
    assert stored("t", config) == {"command": TIME_SERVER, "args": [], "tools": {"deny": ["convert_*"]}}
    edited = cli("servers", "edit", "t", "--allow", "get_*", "--allow", "now", "--config", config)
    assert edited.returncode == 0, edited.stderr
    assert stored("t", config)["tools"] == {"allow": ["get_*", "now"], "deny": ["convert_*"]}
