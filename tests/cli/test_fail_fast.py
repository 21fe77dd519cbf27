"""A mistake in a command's flags or its config is said before the serving stack loads (the MCP SDK's models,
SQLAlchemy: seconds of start-up), so it comes back in a fraction of a second."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from tests.conftest import PYTHON

HEAVY = ["mcp", "sqlalchemy", "sandbox.host", "onetool.gateway", "onetool.bridge"]


def test_bad_flags_and_a_bad_config_are_refused_before_anything_heavy_loads(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("servers: [unclosed\n")
    missing = str(tmp_path / "missing.pem")
    commands = [
        ["serve", "--config", str(bad)],
        ["serve", "--http", "--port", "0", "--config", str(bad)],
        ["serve", "--http", "--tls-cert", missing, "--tls-key", missing],
        ["bridge", "--tls-cert", missing, "--tls-key", missing],
        ["bridge", "--max-servers", "0"],
        ["servers", "--config", str(bad)],
        ["stubs", "--config", str(bad)],
        ["run", "-c", "1", "--config", str(bad)],
        ["tools", "--config", str(bad)],
    ]
    # One interpreter for every command: each must leave the heavy modules unloaded for the next one to be checked.
    probe = (
        "import json, sys; from onetool.cli import main\n"
        f"for command in {commands!r}:\n"
        "    status = main(command)\n"
        f"    heavy = sorted(m for m in sys.modules if any(m == h or m.startswith(h + '.') for h in {HEAVY!r}))\n"
        "    print(json.dumps([status, heavy[:3]]), flush=True)\n"
    )
    env = {"ONETOOL_RUNTIME_DIR": str(tmp_path / "runtime"), "PATH": "/usr/bin:/bin"}
    done = subprocess.run([PYTHON, "-c", probe], capture_output=True, text=True, timeout=60, env=env, cwd=tmp_path)
    results = [json.loads(line) for line in done.stdout.splitlines()]
    assert len(results) == len(commands), done.stderr
    for (status, heavy), command in zip(results, commands, strict=True):
        assert (status, heavy) == (2, []), (command, status, heavy)
    assert "invalid YAML (line 2, column 1)" in done.stderr and "cannot read" in done.stderr
