"""The `onetool` command: outputs and exit codes."""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from onetool.cli import build_parser
from onetool.logs import log_level
from tests.conftest import TIME_SERVER
from tests.gateways import ONETOOL, gateway_config, processes_with, start_http_gateway, stop, write_config


def onetool(
    *args: str, cwd: Path | None = None, stdin: str | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    env = {**{k: v for k, v in os.environ.items() if k not in ("ONETOOL_CONFIG", "LOG_LEVEL")}, **(env or {})}
    return subprocess.run([ONETOOL, *args], capture_output=True, text=True, timeout=60, cwd=cwd, input=stdin, env=env)


class Attached:
    """The module's gateway (tests.gateways.gateway_config without the fault server no test here calls, and with a
    server whose command does not exist, `missing`), in state and runtime folders of its own: a command given its
    ``config`` and run with ``env`` attaches to it, as tests/cli/test_cli_attach.py proves prints what a standalone
    command prints."""

    def __init__(self, config: Path, env: dict[str, str]) -> None:
        self.config, self.env = config, env

    def __call__(
        self, *args: str, cwd: Path | None = None, stdin: str | None = None, env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        """`onetool ARGS --config CONFIG` on the module's gateway."""
        return onetool(*args, "--config", str(self.config), cwd=cwd, stdin=stdin, env={**self.env, **(env or {})})


@pytest.fixture(scope="module")
def attached(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Attached]:
    folder = tmp_path_factory.mktemp("cli")
    env = {"ONETOOL_STATE_DIR": str(folder / "state"), "ONETOOL_RUNTIME_DIR": str(folder / "run")}
    marker = f"cli-{uuid.uuid4().hex}"
    config = gateway_config(marker)
    del config["servers"]["fx"]
    config["servers"]["missing"] = {"command": "no-such-mcp-server-onetool"}
    served = start_http_gateway(folder, config, marker, env=env)
    try:
        yield Attached(folder / "onetool.yaml", env)
    finally:
        assert stop(served.proc) == 0
    assert processes_with(marker) == []


def test_help_and_version() -> None:
    helped = onetool("--help")
    assert helped.returncode == 0
    assert "run(code)" in helped.stdout
    version = onetool("--version")
    assert version.returncode == 0 and version.stdout.startswith("onetool ")


def test_run_prints_the_value(attached: Attached, tmp_path: Path) -> None:
    proc = attached("run", "-c", "x = [1, 2]\nx + [3]", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "[1,2,3]\n"


def test_run_from_file_and_stdin(attached: Attached, tmp_path: Path) -> None:
    (tmp_path / "snippet.py").write_text("'from a file'")
    assert attached("run", "snippet.py", cwd=tmp_path).stdout == "from a file\n"
    assert attached("run", "-", cwd=tmp_path, stdin="6 * 7").stdout == "42\n"


def test_run_failure_exits_1_with_the_error_on_stderr(attached: Attached, tmp_path: Path) -> None:
    proc = attached("run", "-c", "1 / 0", cwd=tmp_path)
    assert proc.returncode == 1
    assert "ZeroDivisionError" in proc.stderr and proc.stdout == ""


TERMINAL_ATTACK = "print('\\x1b]52;c;aGk=\\x07' + chr(0x9b) + chr(0x202e) + chr(0x7f))\nraise ValueError('\\x1b[2J')"
"""OSC 52 (write the operator's clipboard), a C1 CSI, a bidi override, DEL; then an error that clears the screen."""
RAW = ("\x1b", "\x07", "\x9b", "\u202e", "\x7f")


def test_run_never_writes_a_terminal_control_raw(attached: Attached, tmp_path: Path) -> None:
    proc = attached("run", "-c", TERMINAL_ATTACK, cwd=tmp_path)
    assert proc.returncode == 1
    assert not [c for c in RAW if c in proc.stdout + proc.stderr]
    assert "\\x1b]52;c;aGk=\\x07\\x9b\\u202e\\x7f\n" in proc.stderr and "ValueError: \\x1b[2J" in proc.stderr


def test_run_json_gives_the_exact_data(attached: Attached, tmp_path: Path) -> None:
    proc = attached("run", "--json", "-c", TERMINAL_ATTACK, cwd=tmp_path)
    assert proc.returncode == 1 and proc.stdout.isascii() and proc.stderr == ""
    result = json.loads(proc.stdout)
    assert result["isError"] is True
    assert result["structuredContent"]["output"] == "\x1b]52;c;aGk=\x07\x9b\u202e\x7f\n"
    error = result["structuredContent"]["error"]
    assert (error["type"], error["message"], error["origin"]) == ("ValueError", "\x1b[2J", "code")
    assert json.loads(attached("run", "--json", "-c", "[1, '007']", cwd=tmp_path).stdout)["structuredContent"] == {
        "result": [1, "007"]
    }


def test_usage_errors_exit_2(tmp_path: Path) -> None:
    assert onetool("run", cwd=tmp_path).returncode == 2
    both = onetool("run", "-c", "1", "file.py", cwd=tmp_path)
    assert both.returncode == 2 and "not both" in both.stderr
    assert onetool("run", "missing.py", cwd=tmp_path).returncode == 2
    assert onetool("frobnicate").returncode == 2


def test_bad_config_exits_2_naming_file_and_key(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("servers:\n  a:\n    command: x\n    timeout: soon\n")
    proc = onetool("run", "-c", "1", "--config", str(bad))
    assert proc.returncode == 2
    assert "bad.yaml" in proc.stderr and "servers.a.timeout" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_config_from_environment_variable(attached: Attached, tmp_path: Path) -> None:
    """$ONETOOL_CONFIG names the config, here the module gateway's (run from a folder without one): the command
    attaches to the gateway of that config, saying nothing (not to "the only gateway running", which it names)."""
    env = {**os.environ, **attached.env, "ONETOOL_CONFIG": str(attached.config)}
    proc = subprocess.run(
        [ONETOOL, "run", "-c", "[s['name'] for s in proxy.list_servers()]"],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=60,
    )
    assert (proc.stdout, proc.stderr) == ('["brave","broken-server","missing","off","time"]\n', "")


def test_run_with_servers(attached: Attached) -> None:
    proc = attached("run", "-c", "time.get_current_time(timezone='UTC')['timezone']")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "UTC\n"


def test_servers_table(attached: Attached) -> None:
    proc = attached("servers")
    assert proc.returncode == 0, proc.stderr
    lines = {line.split()[0]: line for line in proc.stdout.splitlines()[1:]}
    assert "connected" in lines["time"] and "2025-11-25" in lines["brave"] and "2026-07-28" in lines["time"]
    assert "failed" in lines["broken-server"] and "disabled" in lines["off"]


def test_tools_of_one_server(attached: Attached) -> None:
    proc = attached("tools", "time")
    assert proc.returncode == 0
    assert "time.get_current_time(timezone: str)" in proc.stdout
    assert "brave" not in proc.stdout
    assert attached("tools", "nope").returncode == 2


def test_check_reports_each_server(tmp_path: Path) -> None:
    """`check` never attaches: it connects each server of the config itself (here one that connects and one that
    cannot start)."""
    servers = gateway_config(f"cli-{uuid.uuid4().hex}")["servers"]
    config = write_config(tmp_path, {"servers": {name: servers[name] for name in ("time", "broken-server")}})
    proc = onetool("check", "--config", str(config))
    assert proc.returncode == 1  # broken-server fails
    assert "ok      time: 2 tools (stdio, protocol 2026-07-28)" in proc.stdout
    assert (
        "  FAILED  broken-server: command not found: mcp-server (/nonexistent/mcp-server does not exist) - set "
        "servers.broken-server.command to the server's executable (a full path, or a name on PATH)"
    ) in proc.stdout.splitlines()
    assert "warning" not in proc.stdout  # its failed connect is its own line, not a warning as well


def test_check_config_error(tmp_path: Path) -> None:
    path = write_config(tmp_path, {"http": {"token": "${ONETOOL_TEST_UNSET_VAR}"}})
    proc = onetool("check", "--config", str(path))
    assert (proc.returncode, proc.stdout) == (2, "")
    assert "http.token: environment variable ONETOOL_TEST_UNSET_VAR is not set" in proc.stderr


def test_check_without_a_config_says_where_it_looked(tmp_path: Path) -> None:
    proc = onetool("check", cwd=tmp_path)
    assert (proc.returncode, proc.stdout) == (2, "")
    assert proc.stderr == (
        "onetool check: no config found; looked at: --config (not given), $ONETOOL_CONFIG (not set), "
        f"{tmp_path.resolve() / 'onetool.yaml'} (no such file)\n"
    )


@pytest.mark.parametrize("command", [["check"], ["serve"], ["serve", "--http", "--port", "0"], ["run", "-c", "1"]])
def test_a_typo_in_the_config_is_named_with_what_was_meant(tmp_path: Path, command: list[str]) -> None:
    path = write_config(tmp_path, {"servers": {"a": {"command": "x", "timout": 3}}})
    proc = onetool(*command, "--config", str(path))
    assert (proc.returncode, proc.stdout) == (2, "")
    assert proc.stderr == (
        f"onetool: {path}: invalid configuration: servers.a.timout: unknown key; did you mean 'timeout'?\n"
    )


def test_check_shows_every_warning_then_each_server(tmp_path: Path) -> None:
    """Warnings are no errors (exit 0), and each one is shown, the client settings a file drops included."""
    servers = {
        "time": {"command": TIME_SERVER, "autoApprove": ["get_current_time"]},
        "gh": {"command": "npx", "env": {"T": "${env:ONETOOL_TEST_NO_SUCH}"}, "disabled": True},
    }
    path = tmp_path / "mcp.json"
    path.write_text(json.dumps({"globalShortcut": "Alt+Space", "mcpServers": servers}))
    proc = onetool("check", "--config", str(path))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == [
        f"config: {path}: OK (3 warnings)",
        f"  warning: {path}: ignoring globalShortcut (a client setting OneTool does not use)",
        f"  warning: {path}: ignoring mcpServers.time.autoApprove (a client setting OneTool does not use)",
        f"  warning: {path}: mcpServers.gh.env.T: environment variable ONETOOL_TEST_NO_SUCH is not set; server 'gh' "
        "is disabled, so nothing uses it until the server is enabled (which needs it set)",
        "local packs: proxy",
        "  ok      time: 2 tools (stdio, protocol 2026-07-28)",
        "  -       gh: disabled (needs ONETOOL_TEST_NO_SUCH set)",
    ]


def test_the_readme_lists_every_command() -> None:
    """The README's CLI table names each command and each `servers` action the parser knows."""
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    table = [line for line in readme.split("## The CLI", 1)[1].split("\n## ", 1)[0].splitlines() if line[:2] == "| "]
    rows = " ".join(table)
    commands = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)).choices
    for name, command in commands.items():
        assert f"`onetool {name}" in rows, name
        for sub in command._actions:
            if isinstance(sub, argparse._SubParsersAction):
                for action in sub.choices:
                    assert re.search(rf"`onetool {name} [^`]*\b{action}\b", rows), f"{name} {action}"


def test_the_readme_says_which_commands_take_config_log_file_and_log_level() -> None:
    readme = " ".join((Path(__file__).resolve().parents[2] / "README.md").read_text().split())
    commands = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)).choices

    def taking(option: str) -> set[str]:
        return {
            name
            for name, command in commands.items()
            if any(option in a.option_strings and a.help != argparse.SUPPRESS for a in command._actions)
        }

    def said(option: str) -> set[str]:
        but = re.search(rf"Every command but ([^.()]+?) takes `{option}`", readme)
        assert but, option
        return set(commands) - set(re.findall(r"`(\w+)`", but[1]))

    assert taking("--config") == said("--config")
    assert taking("--log-file") == said("--log-file")
    assert "and all of those but `logs` take `--log-level`" in readme
    assert taking("--log-level") == said("--log-file") - {"logs"}


def test_log_level_from_environment_goes_to_stderr_only(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "ONETOOL_CONFIG"}
    quiet = subprocess.run([ONETOOL, "run", "-c", "1"], capture_output=True, text=True, cwd=tmp_path, env=env)
    assert quiet.stderr == ""
    loud = subprocess.run(
        [ONETOOL, "run", "-c", "1"], capture_output=True, text=True, cwd=tmp_path, env={**env, "LOG_LEVEL": "DEBUG"}
    )
    assert loud.stdout == "1\n"
    assert "run runId=" in loud.stderr and "status=SUCCESS" in loud.stderr


@pytest.mark.parametrize(
    ("name", "level"),
    [
        ("warn", "WARNING"),
        ("WARNING", "WARNING"),
        ("Fatal", "CRITICAL"),
        ("critical", "CRITICAL"),
        ("error", "ERROR"),
        (" Info ", "INFO"),
        ("silent", None),
        ("OFF", None),
        ("debug", "DEBUG"),
    ],
)
def test_log_level_names_in_any_case(name: str, level: str | None) -> None:
    assert log_level(name) == level


@pytest.mark.parametrize("level", ["Info", "OFF"])
def test_a_log_level_named_in_any_case_sets_what_a_command_logs(attached: Attached, tmp_path: Path, level: str) -> None:
    """`run` (attached: it reads the level before it looks for a gateway) takes the name; `serve` logs as it says."""
    proc = attached("run", "-c", "1", cwd=tmp_path, env={"LOG_LEVEL": level})
    assert (proc.returncode, proc.stdout) == (0, "1\n"), proc.stderr
    served = onetool("serve", cwd=tmp_path, stdin="", env={"LOG_LEVEL": level})  # stdio, at once at its end
    assert served.returncode == 0
    assert ("serving MCP over stdio" in served.stderr) is (level == "Info"), served.stderr


REFUSED = "is not a log level: use debug, info, warning (warn), error, critical (fatal) or silent (off)\n"


@pytest.mark.parametrize(
    "command",
    [["run", "-c", "1"], ["servers"], ["tools"], ["check"], ["stubs"], ["import", "x.json"], ["serve"], ["bridge"]],
    ids=lambda command: command[0],
)
def test_a_bad_log_level_is_refused_in_one_line_by_every_command(tmp_path: Path, command: list[str]) -> None:
    proc = onetool(*command, cwd=tmp_path, env={"LOG_LEVEL": "verbose"})
    assert (proc.returncode, proc.stdout, proc.stderr) == (2, "", "onetool: LOG_LEVEL=verbose " + REFUSED)
    if command[0] != "import":  # the one command without the option
        flag = onetool(*command, "--log-level", "loud please", cwd=tmp_path)
        assert (flag.returncode, flag.stderr) == (2, 'onetool: --log-level="loud please" ' + REFUSED)


def test_broken_local_pack_is_a_config_error(tmp_path: Path) -> None:
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "oops.py").write_text("def f(:\n")
    path = write_config(tmp_path, {"packs": {"dirs": ["mine"]}})
    proc = onetool("run", "-c", "1", "--config", str(path))
    assert proc.returncode == 2
    assert "oops.py: local pack failed to import: SyntaxError" in proc.stderr
    missing = write_config(tmp_path, {"packs": {"dirs": ["nope"]}})
    proc = onetool("serve", "--config", str(missing))
    assert proc.returncode == 2 and "is not a folder" in proc.stderr


def test_a_failed_server_is_an_ordinary_error_in_run(attached: Attached, tmp_path: Path) -> None:
    """The module gateway's server `missing` names a command that does not exist."""
    proc = attached("run", "-c", "missing.get_current_time(timezone='UTC')", cwd=tmp_path)
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr
    assert proc.stderr.startswith(
        "[uncaught pack-call error] ToolUnavailable: server 'missing' is unavailable: command not found"
    )


@pytest.mark.parametrize(
    "command",
    [["servers"], ["tools"], ["stubs"], ["check"], ["status"], ["run", "-c", "'x' * 100"], ["completion", "bash"]],
    ids=lambda command: command[0],
)
def test_a_reader_gone_ends_every_printing_command_quietly(
    attached: Attached, tmp_path: Path, command: list[str]
) -> None:
    """`onetool servers | head -3`: the reader left; the command ends with status 0 and says nothing (see
    onetool.cli.main for why 0). Its stdout is a pipe nobody reads from the start, so its first write fails. The
    commands that attach print what the module's gateway answers; `check`, which never attaches, has a config with
    no servers (the config's lines); `status` and `completion` take no config."""
    if command[0] == "check":
        config, folders = write_config(tmp_path, {"servers": {}}), {}
    else:
        config, folders = attached.config, attached.env
    unread, stdout = os.pipe()
    os.close(unread)
    try:
        env = {k: v for k, v in os.environ.items() if k not in ("ONETOOL_CONFIG", "LOG_LEVEL")}
        if command[0] not in ("status", "completion"):
            env.update(folders)
        done = subprocess.run(
            [ONETOOL, *command, *(["--config", str(config)] if command[0] not in ("status", "completion") else [])],
            stdout=stdout,
            stderr=subprocess.PIPE,
            text=True,
            timeout=60,
            env=env,
        )
    finally:
        os.close(stdout)
    assert (done.returncode, done.stderr) == (0, "")


def test_serve_and_run_without_a_config_warn_naming_where_they_looked(tmp_path: Path) -> None:
    """A desktop client that starts OneTool in / gets a gateway with no servers: the log says why."""
    looked = (
        "no config found; looked at: --config (not given), $ONETOOL_CONFIG (not set), "
        f"{tmp_path.resolve() / 'onetool.yaml'} (no such file): starting with no servers; give --config FILE or set "
        "$ONETOOL_CONFIG"
    )
    served = onetool("serve", cwd=tmp_path, stdin="")
    assert served.returncode == 0
    warned = [line.split(None, 2)[1:] for line in served.stderr.splitlines() if "WARNING" in line]
    assert warned == [["WARNING", looked]]
    # `run` logs only errors unless told otherwise: the warning is said on stderr all the same.
    ran = onetool("run", "-c", "time.get_current_time(timezone='UTC')", cwd=tmp_path)
    assert ran.returncode == 1 and f"onetool: warning: {looked}\n" in ran.stderr
    assert "onetool: warning" not in onetool("run", "-c", "1", cwd=tmp_path, env={"LOG_LEVEL": "error"}).stderr
    # A config found is no warning.
    write_config(tmp_path, {"servers": {}})
    assert "WARNING" not in onetool("serve", cwd=tmp_path, stdin="").stderr


@pytest.mark.parametrize(
    ("code", "uses"),
    [
        ("1 + 1", False),
        ("x = [1]\nx + [2]", False),
        ("def f(a, *rest, **kw):\n    return a\nclass C: pass\nf(2)", False),
        ("[i for i in range(3)]\nlambda y: y", False),
        ("import json\nfrom re import sub as s\njson.dumps(s)", False),
        ("try:\n    pass\nexcept ToolError as e:\n    e", False),
        ("parallel(lambda: 1)\nprogress(1, 2)", False),
        ("match {'a': 1}:\n    case {'a': n, **rest}: rest\n    case [*others]: others", False),
        ("x = (1,", False),  # its SyntaxError is the same wherever it runs
        ("time.get_current_time(timezone='UTC')", True),
        ("proxy.list_servers()", True),
        ("f = lambda: gh.search()\nf()", True),
        ("x = wix", True),
    ],
)
def test_which_snippets_use_a_pack(code: str, uses: bool) -> None:
    """What decides whether `onetool run` needs a gateway when it cannot tell which one (no config, several)."""
    from onetool.cli._run import names_packs

    assert names_packs(code) is uses
