"""A mistake in a command's flags or its config is said before the serving stack loads (the MCP SDK's models,
SQLAlchemy: seconds of start-up), so it comes back in a fraction of a second."""

from __future__ import annotations

import os
from pathlib import Path

from tests.cli_in_one_process import onetool_each

HEAVY = ["mcp", "sqlalchemy", "sandbox.host", "onetool.core.gateway", "onetool.bridge"]


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
    ended = onetool_each(commands, env={**os.environ, "ONETOOL_RUNTIME_DIR": str(tmp_path / "runtime")}, cwd=tmp_path)
    for command, done in zip(commands, ended, strict=True):
        heavy = sorted(m for m in done.loaded if any(m == h or m.startswith(h + ".") for h in HEAVY))
        assert (done.returncode, heavy) == (2, []), (command, done.returncode, heavy, done.stderr)
    assert "invalid YAML (line 2, column 1)" in ended[0].stderr and "cannot read" in ended[2].stderr
