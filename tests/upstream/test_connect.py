"""Startup: parallel connects, both protocol eras, failures that leave the others available, status."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from onetool.errors import UpstreamError, UpstreamUnavailable
from onetool.upstream import ServerStatus
from tests.conftest import spans
from tests.upstream.conftest import fault, open_pool


@pytest.mark.parametrize(("mode", "time_era"), [("auto", "2026-07-28"), ("legacy", "2025-11-25")])
async def test_reference_servers_both_eras(
    mode: str, time_era: str, everything_stdio: dict[str, Any], time_stdio: dict[str, Any]
) -> None:
    async with open_pool({"everything": everything_stdio, "time": time_stdio}, mode=mode) as pool:
        everything, time = pool.server_status("everything"), pool.server_status("time")
        assert everything.status == time.status == "connected"
        assert everything.protocol_version == "2025-11-25"  # the npm server only speaks the handshake era
        assert time.protocol_version == time_era
        assert everything.instructions and "Everything" in everything.instructions
        assert {t.name for t in pool.tools("everything")} >= {
            "echo",
            "get-sum",
            "trigger-long-running-operation",
        }
        assert {t.name for t in pool.tools("time")} == {"get_current_time", "convert_time"}

        echo = await pool.call("everything", "echo", {"message": "hi"})
        assert echo.content[0].text == "Echo: hi"
        total = await pool.call("everything", "get-sum", {"a": 2, "b": 3})
        assert "5" in total.content[0].text
        now = await pool.call("time", "get_current_time", {"timezone": "Europe/Paris"})
        assert not now.is_error and "Europe/Paris" in now.content[0].text


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_python_fixture_server_both_eras(mode: str) -> None:
    async with open_pool({"fault": fault("ok")}, mode=mode) as pool:
        st = pool.server_status("fault")
        assert st.protocol_version == ("2026-07-28" if mode == "auto" else "2025-11-25")
        assert st.instructions == "fault fixture server, mode ok"
        result = await pool.call("fault", "add", {"a": 40, "b": 2})
        assert result.structured_content == {"result": 42}


async def test_status_of_every_configured_server(time_stdio: dict[str, Any]) -> None:
    servers = {
        "time-api": time_stdio,
        "off": {**time_stdio, "enabled": False},
        "broken": {"command": "no-such-command-onetool"},
    }
    async with open_pool(servers) as pool:
        by_name = {s.name: s for s in pool.status()}
        assert list(by_name) == ["time-api", "off", "broken"]
        assert by_name["time-api"] == ServerStatus(
            name="time-api",
            pack="time_api",
            type="stdio",
            enabled=True,
            status="connected",
            error=None,
            tool_count=2,
            protocol_version="2026-07-28",
            instructions=None,
        )
        assert by_name["off"].status == "disabled" and not by_name["off"].enabled
        assert by_name["broken"].status == "failed"
        broken = by_name["broken"]
        # The model reads `error` and `fix`; the searched folders (host paths) are for operators only.
        assert broken.error == "command not found: no-such-command-onetool"
        assert broken.fix == "install no-such-command-onetool, or set servers.broken.command to its full path"
        assert broken.detail == f"searched PATH and {Path(sys.executable).parent}"
        assert pool.tools("off") == [] and pool.tools("broken") == []
        with pytest.raises(KeyError):
            pool.server_status("nope")

        with pytest.raises(UpstreamUnavailable, match=r"^server 'off' is unavailable: disabled"):
            await pool.call("off", "get_current_time", {"timezone": "UTC"})
        with pytest.raises(UpstreamUnavailable) as unavailable:
            await pool.call("broken", "x", {})
        assert str(unavailable.value) == (
            "server 'broken' is unavailable: command not found: no-such-command-onetool; "
            "install no-such-command-onetool, or set servers.broken.command to its full path"
        )
        with pytest.raises(UpstreamError, match="unknown server 'nope'"):
            await pool.call("nope", "x", {})


async def test_a_command_that_is_a_path_says_what_is_wrong_with_that_file(tmp_path: Path) -> None:
    """The full path and what is wrong with it go to operators (detail); the model reads the program's name only."""
    (tmp_path / "folder").mkdir()
    (tmp_path / "plain.sh").write_text("#!/bin/sh\n")  # not executable
    servers = {
        "absent": {"command": "/nonexistent/onetool-test/bin/server"},
        "relative": {"command": "./bin/server", "cwd": str(tmp_path)},
        "folder": {"command": str(tmp_path / "folder")},
        "plain": {"command": "./plain.sh", "cwd": str(tmp_path)},
    }
    executable = "set servers.{}.command to the server's executable (a full path, or a name on PATH)"
    async with open_pool(servers) as pool:
        st = {s.name: s for s in pool.status()}
    assert {name: (s.status, s.error, s.detail, s.fix) for name, s in st.items()} == {
        "absent": (
            "failed",
            "command not found: server",
            "/nonexistent/onetool-test/bin/server does not exist",
            executable.format("absent"),
        ),
        "relative": (
            "failed",
            "command not found: server",
            f"{tmp_path / 'bin' / 'server'} does not exist",
            executable.format("relative"),
        ),
        "folder": (
            "failed",
            "command is a directory: folder",
            f"{tmp_path / 'folder'} is a directory",
            executable.format("folder"),
        ),
        "plain": (
            "failed",
            "command is not executable: plain.sh",
            f"{tmp_path / 'plain.sh'} is not executable",
            f"chmod +x it, or {executable.format('plain')}",
        ),
    }
    assert st["absent"].report == (
        "command not found: server (/nonexistent/onetool-test/bin/server does not exist) - set servers.absent.command "
        "to the server's executable (a full path, or a name on PATH)"
    )


async def test_failures_at_startup_leave_the_others_available(log_records: list[dict[str, Any]]) -> None:
    servers = {
        "good": fault("ok"),
        "exits": fault("exit"),
        "hangs": fault("hang", connect_timeout=2),
        "missing": {"command": "no-such-command-onetool"},
        "no-module": {"command": "node", "args": ["/nonexistent/onetool-test/server.js"]},
    }
    async with open_pool(servers) as pool:
        st = {s.name: s for s in pool.status()}
        assert st["good"].status == "connected"
        assert st["exits"].status == "failed"
        # Its stderr may hold secrets: operators see it, snippets only the exit status and what to check.
        assert st["exits"].error == "process exited with status 3"
        assert st["exits"].detail == "fault server: refusing to start (mode exit)"
        assert st["exits"].fix == (
            "its process exits at start: see its stderr in OneTool's log; check servers.exits.command/args/env"
        )
        # Node's last stderr line is its version banner; the meaningful one is the error near the top.
        assert st["no-module"].error == "process exited with status 1"
        assert st["no-module"].detail is not None and st["no-module"].detail.startswith("Error: Cannot find module")
        assert st["hangs"].status == "failed" and st["hangs"].error == "connect timed out after 2.0 s"
        assert st["missing"].status == "failed"
        assert (await pool.call("good", "echo", {"message": "x"})).content[0].text == "echo: x"

    init = spans(log_records, "proxy.init")[0]
    assert init["serverCount"] == 5 and init["connected"] == 1 and init["failed"] == 4
    # Parallel: the hanging server's 2 s connect timeout overlaps the others' start-up.
    assert init["duration"] < 8
    warnings = [r for r in log_records if r["level"] == "WARNING" and r["extra"].get("span") == "proxy.connect"]
    assert {r["extra"]["server"] for r in warnings} >= {"exits", "hangs", "missing"}


async def test_parallel_startup_takes_the_slowest_not_the_sum(log_records: list[dict[str, Any]]) -> None:
    servers = {f"hang{i}": fault("hang", connect_timeout=2) for i in range(3)}
    async with open_pool(servers) as pool:
        assert {s.status for s in pool.status()} == {"failed"}
    # One after another would be at least 3 x 2 s.
    assert spans(log_records, "proxy.init")[0]["duration"] < 5.5


async def test_stdio_env_cwd_and_stderr(tmp_path: Path, log_records: list[dict[str, Any]]) -> None:
    servers = {"fx": fault("ok", env={"FIXTURE_SECRET": "s3cr3t-value-42"}, cwd=str(tmp_path))}
    async with open_pool(servers) as pool:
        assert (await pool.call("fx", "getenv", {"name": "FIXTURE_SECRET"})).structured_content == {
            "result": "s3cr3t-value-42"
        }
        assert (await pool.call("fx", "cwd", {})).structured_content == {"result": str(tmp_path)}
    stderr = [r for r in log_records if r["message"].startswith("stderr: fault server: starting")]
    assert stderr and stderr[0]["extra"]["server"] == "fx"


async def test_npx_command(everything_stdio: dict[str, Any]) -> None:
    # The spec's "command: npx": npx is found on PATH and runs the pinned local install, offline.
    tests_dir = Path(everything_stdio["args"][0]).parents[3]
    server = {
        "command": "npx",
        "args": ["--offline", "--no-install", "mcp-server-everything", "stdio"],
        "cwd": tests_dir,
    }
    async with open_pool({"everything": server}) as pool:
        assert pool.server_status("everything").status == "connected"
        total = await pool.call("everything", "get-sum", {"a": 2, "b": 3})
        assert "5" in total.content[0].text


async def test_junk_on_stdout_is_skipped() -> None:
    async with open_pool({"junk": fault("junk")}) as pool:
        assert pool.server_status("junk").status == "connected"
        assert (await pool.call("junk", "noisy", {})).structured_content == {"result": "noisy done"}
        assert (await pool.call("junk", "echo", {"message": "still fine"})).content[0].text == "echo: still fine"


async def test_command_is_found_beside_onetools_interpreter() -> None:
    # MCP clients start `.venv/bin/onetool` without activating the venv: its servers must still be found.
    server = {"command": "mcp-server-time", "env": {"PATH": "/usr/bin:/bin"}}
    async with open_pool({"time": server}) as pool:
        assert pool.server_status("time").status == "connected"
