"""FastMCP 4.2.3's CodeMode for the benches: its venv (made once, under the user's cache folder) and its server."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from mcp import StdioServerParameters

from bench import CACHE
from bench.gateway_bench import ROOT

RELEASE = "fastmcp[code-mode]==4.2.3"
VENV = CACHE / "fastmcp-4.2.3"
SERVER = ROOT / "bench/fastmcp_codemode_server.py"
ONE_PLUS_ONE = "return 1+1"
ONE_CALL = "return await call_tool('echo', {'message': 'x'})"
"""CodeMode's snippets are async Python with `return`: the same work as OneTool's `1+1` and `fx.echo(message='x')`."""


def install() -> tuple[Path | None, str]:
    """The venv's python, made on first use with this interpreter; else None and why."""
    python = VENV / "bin" / "python"
    if python.exists():
        return python, ""
    shutil.rmtree(VENV, ignore_errors=True)
    subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True, capture_output=True)
    done = subprocess.run([str(VENV / "bin" / "pip"), "install", "-q", RELEASE], capture_output=True, text=True)
    if done.returncode != 0:
        shutil.rmtree(VENV, ignore_errors=True)
        errors = [line for line in done.stderr.splitlines() if line.startswith("ERROR")]
        return None, (errors or ["pip failed"])[-1]
    return python, ""


def stdio_server(python: Path, upstream: list[str]) -> StdioServerParameters:
    return StdioServerParameters(command=str(python), args=[str(SERVER), "stdio", *upstream])


def http_command(python: Path, port: int, upstream: list[str]) -> list[str]:
    return [str(python), str(SERVER), str(port), *upstream]
