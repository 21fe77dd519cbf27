"""The MCP Inspector's CLI (npm @modelcontextprotocol/inspector, pinned in tests/package.json) against a real
`onetool serve --http`, at the alias paths that end in /mcp: the CLI rewrites any other path to /mcp, the run face.

0.15.0 is the last Inspector that runs on Node 20 (0.16+ needs Node 22); it runs offline once installed.
"""

from __future__ import annotations

import json
import re
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import FIXTURES, PYTHON, TESTS
from tests.fixtures.big_server import numbered
from tests.gateways import ServedGateway, origin, start_http_gateway, stop

INSPECTOR = TESTS / "node_modules" / ".bin" / "mcp-inspector"
LIMIT = 1_000


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServedGateway]:
    folder = tmp_path_factory.mktemp("inspector")
    config = {
        "http": {"enable_direct_endpoint": True, "enable_inspect_endpoint": True},
        "servers": {
            "fx": {"command": PYTHON, "args": [str(FIXTURES / "fault_server.py"), "ok"]},
            "big": {"command": PYTHON, "args": [str(FIXTURES / "big_server.py")]},
        },
        "sandbox": {"max_output": LIMIT},
    }
    served = start_http_gateway(folder, config, f"inspector-{uuid.uuid4().hex}")
    try:
        yield served
    finally:
        assert stop(served.proc) == 0


def inspector(served: ServedGateway, path: str, home: Path, *args: str) -> Any:
    """What the Inspector's CLI prints (JSON) for one method at ``path`` of the gateway; it must exit 0."""
    done = subprocess.run(
        [str(INSPECTOR), "--cli", origin(served.url) + path, "--transport", "http", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": str(Path(PYTHON).parent) + ":/usr/local/bin:/usr/bin:/bin", "HOME": str(home)},
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def text_of(answer: dict[str, Any]) -> str:
    return "\n".join(c["text"] for c in answer["content"] if c["type"] == "text")


def test_direct_alias_lists_and_calls(served: ServedGateway, tmp_path: Path) -> None:
    listed = inspector(served, "/direct/mcp", tmp_path, "--method", "tools/list")
    names = [t["name"] for t in listed["tools"]]
    assert names[:4] == ["run", "upstream_servers", "quarantine_security", "read_cache"]
    assert {"fx:echo", "big:plain"} <= set(names)
    echoed = inspector(
        served, "/direct/mcp", tmp_path, "--method", "tools/call", "--tool-name", "fx:echo", "--tool-arg", "message=hi"
    )
    assert not echoed.get("isError") and text_of(echoed) == "echo: hi"


def test_a_cut_result_is_read_on_with_read_cache(served: ServedGateway, tmp_path: Path) -> None:
    call = ["--method", "tools/call"]
    cut = inspector(served, "/direct/mcp", tmp_path, *call, "--tool-name", "big:plain", "--tool-arg", "chars=1500")
    found = re.search(r"read_cache\(key='([^']+)', offset=(\d+)\)", text_of(cut))
    assert found, text_of(cut)
    key, offset = found.groups()
    rest = inspector(
        served,
        "/direct/mcp",
        tmp_path,
        *call,
        "--tool-name",
        "read_cache",
        "--tool-arg",
        f"key={key}",
        f"offset={offset}",
    )
    assert text_of(rest).startswith(numbered(1500)[LIMIT:] + "\n... [read_cache: characters 1,000 to 1,500 of 1,500")


def test_inspect_alias_lists_and_execs(served: ServedGateway, tmp_path: Path) -> None:
    listed = inspector(served, "/inspect/mcp", tmp_path, "--method", "tools/list")
    assert [t["name"] for t in listed["tools"]] == ["inspect", "exec"]
    executed = inspector(
        served,
        "/inspect/mcp",
        tmp_path,
        "--method",
        "tools/call",
        "--tool-name",
        "exec",
        "--tool-arg",
        "server_name=fx",
        "tool_name=echo",
        'arguments={"message": "via the inspector"}',
    )
    assert not executed.get("isError") and "via the inspector" in text_of(executed)


def test_without_the_alias_the_cli_reaches_the_run_face(served: ServedGateway, tmp_path: Path) -> None:
    """Why the aliases exist: /mcp/direct is rewritten to /mcp by the CLI."""
    listed = inspector(served, "/mcp/direct", tmp_path, "--method", "tools/list")
    assert [t["name"] for t in listed["tools"]] == ["run"]


def test_a_direct_name_sent_to_the_run_face_is_told_where_it_is_served(served: ServedGateway, tmp_path: Path) -> None:
    """The rewritten /mcp/direct call of `fx:echo` reaches the run face, which names the alias that works and the
    snippet that calls the same tool there."""
    call = ["--method", "tools/call", "--tool-name", "fx:echo", "--tool-arg", "message=hi"]
    answer = inspector(served, "/mcp/direct", tmp_path, *call)
    assert answer.get("isError") is True
    text = text_of(answer)
    assert text.startswith("Unknown tool 'fx:echo': this endpoint has one tool, `run`")
    assert "connect to /direct/mcp on this gateway" in text and "call `run` with code `fx.echo(...)`" in text
