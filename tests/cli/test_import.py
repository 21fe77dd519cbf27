"""`onetool import FILE`: a client's mcpServers file -> the equivalent onetool.yaml, and what changed."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from onetool.cli import EXIT_OK, EXIT_USAGE, main
from onetool.config import load_config

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "clients"
ENV = {"EVERYTHING_HTTP_URL": "http://127.0.0.1:1/mcp", "EVERYTHING_SSE_URL": "http://127.0.0.1:1/sse", "HOME": "/h"}

CLIENT = """{
  "globalShortcut": "Alt+Space",
  "mcpServers": {
    "github-api": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-github"],
                   "env": {"GITHUB_TOKEN": "${GITHUB_TOKEN}"}, "disabled": true, "autoApprove": ["create_issue"]},
    "notion": {"type": "streamable-http", "url": "https://mcp.notion.com/mcp",
               "headers": {"Authorization": "Bearer ${env:NOTION_TOKEN}"}},
    "legacy": {"serverUrl": "http://127.0.0.1:9/sse", "type": "sse", "timeout": 60}
  }
}"""


def run_import(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    status = main(["import", *args])
    out, err = capsys.readouterr()
    return status, out, err


@pytest.mark.parametrize("name", sorted(p.name for p in EXAMPLES.glob("*.json")))
def test_every_example_round_trips(tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str) -> None:
    source = tmp_path / name
    shutil.copy(EXAMPLES / name, source)
    status, out, _ = run_import(capsys, str(source), "-o", str(tmp_path / "onetool.yaml"))
    assert status == EXIT_OK, out
    imported = load_config(tmp_path / "onetool.yaml", environ=ENV)
    original = load_config(source, environ=ENV)
    assert imported.model_dump() == original.model_dump()
    assert imported.servers  # not vacuous: the example has servers


def test_import_says_what_it_changed_and_keeps_variables(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("GITHUB_TOKEN", raising=False)
    monkeypatch.delenv("NOTION_TOKEN", raising=False)
    source = tmp_path / "claude_desktop_config.json"
    source.write_text(CLIENT)
    output = tmp_path / "onetool.yaml"
    status, out, _ = run_import(capsys, str(source), "-o", str(output))
    assert status == EXIT_OK
    assert out.splitlines() == [
        f"wrote {output} (3 servers) from {source}",
        "  renamed  mcpServers -> servers",
        "  renamed  mcpServers.github-api.disabled: true -> servers.github-api.enabled: false",
        "  renamed  mcpServers.notion.type: streamable-http -> servers.notion.type: http",
        "  renamed  mcpServers.notion: ${env:NOTION_TOKEN} -> ${NOTION_TOKEN}",
        "  renamed  mcpServers.legacy.serverUrl -> servers.legacy.url",
        "  dropped  globalShortcut (a client setting OneTool does not use)",
        "  dropped  mcpServers.github-api.autoApprove (a client setting OneTool does not use)",
        "  dropped  mcpServers.legacy.timeout (clients disagree on its unit; "
        "set servers.legacy.timeout in seconds in onetool.yaml)",
        "  pack     server 'github-api' is the pack 'github_api' in snippets",
        "  warning  servers.github-api.env.GITHUB_TOKEN: ${GITHUB_TOKEN} is not set here: server 'github-api' is "
        "disabled; enabling it needs it set",
        "  warning  servers.notion.headers.Authorization: ${NOTION_TOKEN} is not set here: server 'notion' fails (the "
        "other servers serve) until it is set",
    ]
    text = output.read_text()
    assert "${GITHUB_TOKEN}" in text and "Bearer ${NOTION_TOKEN}" in text  # references, not values
    config = load_config(output, environ={"GITHUB_TOKEN": "g", "NOTION_TOKEN": "n"})
    assert not config.servers["github-api"].enabled
    assert config.servers["notion"].headers == {"Authorization": "Bearer n"}
    assert (config.servers["legacy"].transport, config.servers["legacy"].timeout) == ("sse", 30)


def test_import_refuses_to_overwrite_without_force(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = tmp_path / "mcp.json"
    source.write_text(CLIENT)
    output = tmp_path / "onetool.yaml"
    output.write_text("# mine\n")
    status, _, err = run_import(capsys, str(source), "-o", str(output))
    assert (status, output.read_text()) == (EXIT_USAGE, "# mine\n")
    assert f"{output} exists; pass --force to overwrite it" in err
    assert run_import(capsys, str(source), "-o", str(output), "--force")[0] == EXIT_OK
    assert "github-api" in output.read_text()


def test_import_errors_name_the_file_and_key(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    output = tmp_path / "onetool.yaml"
    bad = tmp_path / "bad.json"
    bad.write_text('{"mcpServers": {"a": {"command": "x", "comand": "y"}}}')
    status, _, err = run_import(capsys, str(bad), "-o", str(output))
    assert status == EXIT_USAGE
    assert f"{bad}: invalid configuration: mcpServers.a.comand: unknown key" in err
    ours = tmp_path / "ours.yaml"
    ours.write_text("servers: {}\n")
    status, _, err = run_import(capsys, str(ours), "-o", str(output))
    assert status == EXIT_USAGE and "has no top-level 'mcpServers': not a client config" in err
    assert not output.exists()


def test_import_drops_the_clients_entry_for_onetool_itself(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The README has users add OneTool to their client: as a server of OneTool's own it would run itself."""
    monkeypatch.setenv("ONETOOL_TEST_SET", "x")
    source = tmp_path / "claude_desktop_config.json"
    source.write_text(
        json.dumps(
            {
                "mcpServers": {
                    "onetool": {"command": "/opt/onetool/.venv/bin/onetool", "args": ["serve", "--config", "o.yaml"]},
                    "gateway": {"command": "uvx", "args": ["onetool", "serve"]},
                    "remote-onetool": {"type": "http", "url": "http://127.0.0.1:8765/mcp"},
                    "OneTool": {"type": "http", "url": "http://127.0.0.1:8765/mcp"},
                    "time": {"command": "uvx", "args": ["mcp-server-time"], "env": {"S": "${ONETOOL_TEST_SET}"}},
                }
            }
        )
    )
    output = tmp_path / "onetool.yaml"
    status, out, _ = run_import(capsys, str(source), "-o", str(output))
    assert status == EXIT_OK
    assert out.splitlines() == [
        f"wrote {output} (2 servers) from {source}",
        "  renamed  mcpServers -> servers",
        "  dropped  mcpServers.onetool (OneTool itself: the client's entry for it)",
        "  dropped  mcpServers.gateway (OneTool itself: the client's entry for it)",
        "  dropped  mcpServers.OneTool (OneTool itself: the client's entry for it)",
        "  pack     server 'remote-onetool' is the pack 'remote_onetool' in snippets",
    ]
    assert list(load_config(output).servers) == ["remote-onetool", "time"]
    # Read as a config as it is, the file drops it too, with a warning (check passes instead of refusing it).
    assert list(load_config(source).servers) == ["remote-onetool", "time"]
