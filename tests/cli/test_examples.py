"""Every file under examples/ does what it says, checked through the real `onetool` command: each config file passes
`onetool check`, each client snippet runs a command that exists (and serves), each snippet and pack runs, and the
clients' README names the endpoints that answer. A file added to examples/ without a test here fails
test_every_example_is_exercised."""

from __future__ import annotations

import json
import os
import re
import subprocess
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import EVERYTHING_JS
from tests.gateways import ONETOOL, origin, stop, wait_for_record
from tests.processes import start_and_read_line

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
CLIENTS = EXAMPLES / "clients"
SNIPPETS = EXAMPLES / "snippets"

COVERED = {
    "full.yaml": "test_the_full_example_passes_check",
    "claude_desktop_config.json": "test_the_client_snippets_run_onetool_and_it_serves",
    "clients/README.md": "test_the_clients_readme_names_the_endpoints_that_answer",
    "clients/claude_code.mcp.json": "test_each_client_config_passes_check",
    "clients/claude_desktop_config.json": "test_each_client_config_passes_check",
    "clients/cline_mcp_settings.json": "test_each_client_config_passes_check",
    "clients/cursor_mcp.json": "test_each_client_config_passes_check",
    "packs/text.py": "test_the_snippets_and_the_pack_run",
    "snippets/discover.py": "test_the_snippets_and_the_pack_run",
    "snippets/errors.py": "test_the_snippets_and_the_pack_run",
    "snippets/time_in_cities.py": "test_the_snippets_and_the_pack_run",
}


def onetool(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """The command with none of the variables the examples read set, unless ``env`` sets them."""
    ours = ("ONETOOL_CONFIG", "LOG_LEVEL", "GITHUB_TOKEN", "NOTION_TOKEN", "EVERYTHING_HTTP_URL", "EVERYTHING_SSE_URL")
    base = {k: v for k, v in os.environ.items() if k not in ours}
    return subprocess.run(
        [ONETOOL, *args], capture_output=True, text=True, timeout=120, env={**base, **(env or {})}, cwd=cwd
    )


def test_every_example_is_exercised() -> None:
    files = {str(p.relative_to(EXAMPLES)) for p in EXAMPLES.rglob("*") if p.is_file() and "__pycache__" not in p.parts}
    assert files == set(COVERED)


# ----- config files through `onetool check` -------------------------------------------------------------------

CLIENT_WARNINGS = {
    "claude_code.mcp.json": [],
    "claude_desktop_config.json": ["ignoring globalShortcut (a client setting OneTool does not use)"],
    "cursor_mcp.json": [],
    "cline_mcp_settings.json": [
        "ignoring mcpServers.time.autoApprove (a client setting OneTool does not use)",
        "ignoring mcpServers.time.timeout (clients disagree on its unit; set servers.time.timeout in seconds in "
        "onetool.yaml)",
        "ignoring mcpServers.everything-sse.alwaysAllow (a client setting OneTool does not use)",
    ],
}
"""What `onetool check` warns about in each client file: every warning is shown."""


@pytest.mark.parametrize("path", sorted(CLIENTS.glob("*.json")), ids=lambda p: p.name)
def test_each_client_config_passes_check(path: Path, everything_http: str, everything_sse: str) -> None:
    """Every enabled server connects (the HTTP ones at the URLs these variables name, as the README says)."""
    env = {"EVERYTHING_HTTP_URL": everything_http, "EVERYTHING_SSE_URL": everything_sse}
    proc = onetool("check", "--config", str(path), env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    warnings = CLIENT_WARNINGS[path.name]
    lines = proc.stdout.splitlines()
    assert lines[0] == f"config: {path}: OK" + (
        f" ({len(warnings)} warning{'s' * (len(warnings) > 1)})" if warnings else ""
    )
    assert lines[1 : 1 + len(warnings)] == [f"  warning: {path}: {w}" for w in warnings]
    raw = json.loads(path.read_text())["mcpServers"]
    for name, server in raw.items():
        state = "-       " if server.get("disabled") else "ok      "
        assert any(line.startswith(f"  {state}{name}: ") for line in lines), (name, proc.stdout)


def test_the_full_example_passes_check(tmp_path: Path) -> None:
    """It shows every key, so it names servers on the network and folders of a server: `--no-connect` checks the
    file and its local packs, and `--log-file` keeps its log.file (/var/log/...) out of the test."""
    full = EXAMPLES / "full.yaml"
    log = str(tmp_path / "check.log")
    proc = onetool("check", "--no-connect", "--config", str(full), "--log-file", log, env={"GITHUB_TOKEN": "t"})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == [
        f"config: {full}: OK (1 warning)",
        f"  warning: {full}: servers.notion.headers.Authorization: environment variable NOTION_TOKEN is not set; "
        "server 'notion' is disabled, so nothing uses it until the server is enabled (which needs it set)",
        "local packs: proxy, text",
        "  -       github-api: not tried (stdio)",
        "  -       notion: disabled (needs NOTION_TOKEN set)",
        "  -       linear: not tried (http)",
    ]
    # Without GITHUB_TOKEN, that server alone cannot run: `serve` runs the others, `check` exits 2 for it.
    unset = onetool("check", "--no-connect", "--config", str(full), "--log-file", log)
    assert unset.returncode == 2, unset.stderr
    assert (
        "  FAILED  github-api: environment variable GITHUB_TOKEN is not set - set it where OneTool starts, and start "
        "it again" in unset.stdout.splitlines()
    )
    assert "  -       linear: not tried (http)" in unset.stdout.splitlines()


# ----- client snippets that run OneTool itself -------------------------------------------------------------------


def readme_snippets() -> list[tuple[str, list[str]]]:
    """The command lines the README's "Connecting a client" gives: the JSON block and `claude mcp add`."""
    section = (ROOT / "README.md").read_text().split("## Connecting a client", 1)[1].split("\n## ", 1)[0]
    block = json.loads(section.split("```json", 1)[1].split("```", 1)[0])["mcpServers"]["onetool"]
    claude = re.search(r"`claude mcp add onetool -- ([^`]+)`", section)
    assert claude is not None, "the README names no `claude mcp add` line"
    return [("README.md json", [block["command"], *block["args"]]), ("README.md claude", claude.group(1).split())]


def real_paths(text: str) -> str:
    """A snippet's placeholders as this checkout's paths."""
    for prefix in ("/absolute/path/to/", "/path/to/"):
        text = text.replace(f"{prefix}onetool.yaml", str(ROOT / "onetool.yaml")).replace(
            f"{prefix}onetool/", f"{ROOT}/"
        )
    return text


def test_the_client_snippets_run_onetool_and_it_serves(tmp_path: Path) -> None:
    desktop = EXAMPLES / "claude_desktop_config.json"
    entry = json.loads(desktop.read_text())["mcpServers"]["onetool"]
    for where, argv in [("claude_desktop_config.json", [entry["command"], *entry["args"]]), *readme_snippets()]:
        command, *args = [real_paths(word) for word in argv]
        assert Path(command).is_file() and os.access(command, os.X_OK), (where, command)
        assert Path(command).resolve() == Path(ONETOOL).resolve(), where  # this checkout's venv
        assert args[:2] == ["serve", "--config"] and Path(args[2]).is_file(), (where, args)

    # As written, the file is valid; read as OneTool's own config, its entry for OneTool is left out (a gateway is
    # not its own upstream).
    as_written = onetool("check", "--no-connect", "--config", str(desktop))
    assert as_written.returncode == 0, as_written.stdout + as_written.stderr
    assert "ignoring mcpServers.onetool (OneTool itself: the client's entry for it)" in as_written.stdout
    # With this checkout's paths, the client's server is OneTool serving its one tool: tried as a server of a
    # gateway's own config, as the client would start it.
    client = json.loads(real_paths(desktop.read_text()))["mcpServers"]["onetool"]
    # The client starts OneTool with only HOME, PATH and the env it names: its state store too is this test's own.
    client["env"].update({k: os.environ[k] for k in ("ONETOOL_STATE_DIR", "ONETOOL_RUNTIME_DIR")})
    (tmp_path / "gateway.yaml").write_text(json.dumps({"servers": {"desktop-entry": client}}))
    served = onetool("check", "--config", str(tmp_path / "gateway.yaml"))
    assert served.returncode == 0, served.stdout + served.stderr
    assert re.search(r"^  ok      desktop-entry: 1 tool \(stdio, protocol [\d-]+\)$", served.stdout, re.M), (
        served.stdout
    )


# ----- snippets, the pack, and the endpoints -----------------------------------------------------------------------


@pytest.fixture(scope="module")
def shipped(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """`onetool serve --http` on the example config (onetool.yaml), in folders of its own and started in one (not
    the repository, where its relative paths would resolve either way); yields the env that points the CLI at it,
    and its URL."""
    folder = tmp_path_factory.mktemp("shipped")
    folders = {"ONETOOL_STATE_DIR": str(folder / "state"), "ONETOOL_RUNTIME_DIR": str(folder / "run")}
    log = folder / "gateway.log"
    command = [
        ONETOOL,
        "serve",
        "--http",
        "--port",
        "0",
        "--config",
        str(ROOT / "onetool.yaml"),
        "--log-file",
        str(log),
    ]
    proc, url = start_and_read_line(command, env={**os.environ, **folders}, stderr=folder / "serve.stderr", cwd=folder)
    try:
        wait_for_record(log, "proxy.init")  # every server connected (discover.py lists the connected ones)
        yield {**folders, "URL": url}
    finally:
        assert stop(proc) == 0


SNIPPET_RESULTS: dict[str, Any] = {
    "discover.py": lambda r: set(r) == {"time", "everything"} and "get_current_time" in r["time"],
    "errors.py": lambda r: r.startswith("caught: everything.get_sum(a: float, b: float): argument 'b':"),
    "time_in_cities.py": lambda r: (
        set(r) == {"Paris", "Tokyo", "New York"} and all(re.fullmatch(r"\d\d:\d\d", t) for t in r.values())
    ),
}


@pytest.mark.parametrize("snippet", sorted(SNIPPETS.glob("*.py")), ids=lambda p: p.name)
def test_the_snippets_and_the_pack_run(shipped: dict[str, str], snippet: Path) -> None:
    proc = onetool("run", str(snippet), env=shipped)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout.removesuffix("\n")
    result = json.loads(out) if out[:1] in "{[" else out
    assert SNIPPET_RESULTS[snippet.name](result), out
    pack = onetool("run", "-c", "[text.slugify('Hello World'), text.word_counts('a b a', top=1)]", env=shipped)
    assert pack.stdout == '["hello-world",[{"word":"a","count":2}]]\n', pack.stderr


def test_shipped_config_works_from_any_folder(shipped: dict[str, str], tmp_path: Path) -> None:
    """Its relative server arguments resolve in the config file's folder, not the current one: the module's
    gateway serves it started in a folder of its own, and the CLI names it from another."""
    proc = onetool(
        "run", "--config", str(ROOT / "onetool.yaml"), "-c", "everything.echo(message='hi')", env=shipped, cwd=tmp_path
    )
    assert proc.returncode == 0, proc.stderr
    assert (proc.stdout, proc.stderr) == ("Echo: hi\n", "")


def status_of(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.status
    except urllib.error.HTTPError as e:
        return e.code


def test_the_clients_readme_names_the_endpoints_that_answer(
    shipped: dict[str, str], everything_http: str, everything_sse: str
) -> None:
    readme = (CLIENTS / "README.md").read_text()
    started = dict(re.findall(r"PORT=\d+ node \S+ (\w+) +# (http://\S+)", readme))
    assert started == {"streamableHttp": "http://127.0.0.1:3001/mcp", "sse": "http://127.0.0.1:3002/sse"}
    assert f"node {EVERYTHING_JS.relative_to(ROOT)} " in readme
    # The files' defaults are those URLs.
    defaults = re.findall(r"\$\{(EVERYTHING_\w+_URL):-([^}]+)\}", " ".join(p.read_text() for p in CLIENTS.glob("*")))
    assert set(defaults) == {("EVERYTHING_HTTP_URL", started["streamableHttp"]), ("EVERYTHING_SSE_URL", started["sse"])}
    # One transport per process, as it says (the fixtures start server-everything in those two modes).
    assert status_of(everything_http.replace("/mcp", "/sse")) == 404
    assert everything_sse.endswith("/sse") and everything_http.endswith("/mcp")
    # OneTool serves /mcp, and no SSE endpoint.
    assert shipped["URL"].endswith("/mcp") and status_of(origin(shipped["URL"]) + "/sse") == 404
    assert "no SSE endpoint" in " ".join(readme.split())
