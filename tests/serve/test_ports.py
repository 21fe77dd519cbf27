"""`onetool serve --http` ports: without --port each gateway gets a free one of its own; a given port is used."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import httpx2

from tests.conftest import free_port
from tests.gateways import ONETOOL, write_config
from tests.processes import start_and_read_line, stop


def _serve(folder: Path, *port: str) -> tuple[subprocess.Popen[str], str]:
    folder.mkdir()
    config = write_config(folder, {"servers": {}})
    # Each gateway keeps its own runtime folder: the discovery file is not what this test is about.
    env = {**os.environ, "ONETOOL_RUNTIME_DIR": str(folder / "run"), "ONETOOL_STATE_DIR": str(folder / "state")}
    return start_and_read_line([ONETOOL, "serve", "--http", *port, "--config", str(config)], env=env)


def test_without_a_port_two_gateways_at_once_get_free_ports_of_their_own(tmp_path: Path) -> None:
    first, first_url = _serve(tmp_path / "a")
    try:
        second, second_url = _serve(tmp_path / "b")
        try:
            assert first_url.startswith("http://127.0.0.1:") and second_url.startswith("http://127.0.0.1:")
            assert first_url != second_url
            for url in (first_url, second_url):
                assert httpx2.get(url.removesuffix("/mcp") + "/health", timeout=10).status_code == 200
        finally:
            assert stop(second)
    finally:
        assert stop(first)


def test_a_given_port_is_used(tmp_path: Path) -> None:
    port = free_port()
    proc, url = _serve(tmp_path / "a", "--port", str(port))
    try:
        assert url == f"http://127.0.0.1:{port}/mcp"
        assert httpx2.get(f"http://127.0.0.1:{port}/health", timeout=10).status_code == 200
    finally:
        assert stop(proc)
