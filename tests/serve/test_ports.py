"""`onetool serve --http` ports: 8765 without --port (what the README's client lines name), and when it is taken a
clear error that names --port 0; --port 0 gives each gateway a free one of its own; a given port is used.

No test here serves on 8765 itself: tests run in parallel, and a developer may have `make run` on it."""

from __future__ import annotations

import errno
import os
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx2
import pytest

from onetool.cli import DEFAULT_PORT, build_parser
from tests.conftest import free_port
from tests.gateways import ONETOOL, write_config
from tests.processes import start_and_read_line, stop


def _folder_env(folder: Path) -> dict[str, str]:
    # Each gateway keeps its own runtime folder: the discovery file is not what this test is about.
    return {**os.environ, "ONETOOL_RUNTIME_DIR": str(folder / "run"), "ONETOOL_STATE_DIR": str(folder / "state")}


def _serve(folder: Path, *port: str) -> tuple[subprocess.Popen[str], str]:
    folder.mkdir()
    config = write_config(folder, {"servers": {}})
    return start_and_read_line([ONETOOL, "serve", "--http", *port, "--config", str(config)], env=_folder_env(folder))


def test_without_a_port_it_is_8765() -> None:
    assert DEFAULT_PORT == 8765
    assert build_parser().parse_args(["serve", "--http"]).port == DEFAULT_PORT


@pytest.fixture
def default_port_taken() -> Iterator[None]:
    """8765 held by this test, or already by someone else: taken either way while the test runs."""
    holder = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        holder.bind(("127.0.0.1", DEFAULT_PORT))
        holder.listen(1)
    except OSError as e:
        assert e.errno == errno.EADDRINUSE, e
    try:
        yield
    finally:
        holder.close()


@pytest.mark.usefixtures("default_port_taken")
def test_a_taken_default_port_says_so_and_names_port_0(tmp_path: Path) -> None:
    config = write_config(tmp_path, {"servers": {}})
    done = subprocess.run(
        [ONETOOL, "serve", "--http", "--config", str(config)],
        capture_output=True,
        text=True,
        timeout=60,
        env=_folder_env(tmp_path),
    )
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr.startswith("onetool: port 8765 is already in use on 127.0.0.1"), done.stderr
    assert done.stderr.endswith(": choose another with --port N, or --port 0 for a free one\n"), done.stderr
    assert "Traceback" not in done.stderr


def test_a_port_held_by_a_gateway_names_its_config(tmp_path: Path) -> None:
    first, url = _serve(tmp_path / "a", "--port", "0")
    try:
        port = url.removeprefix("http://127.0.0.1:").removesuffix("/mcp")
        config = write_config(tmp_path, {"servers": {}})
        done = subprocess.run(
            [ONETOOL, "serve", "--http", "--port", port, "--config", str(config)],
            capture_output=True,
            text=True,
            timeout=60,
            env=_folder_env(tmp_path / "a"),  # the runtime folder where the first one published itself
        )
        assert done.returncode == 1
        held_by = tmp_path / "a" / "onetool.yaml"
        assert done.stderr == (
            f"onetool: port {port} is already in use on 127.0.0.1 (by the gateway of {held_by}; `onetool status` lists "
            "them): choose another with --port N, or --port 0 for a free one\n"
        )
    finally:
        assert stop(first)


def test_with_port_0_two_gateways_at_once_get_free_ports_of_their_own(tmp_path: Path) -> None:
    first, first_url = _serve(tmp_path / "a", "--port", "0")
    try:
        second, second_url = _serve(tmp_path / "b", "--port", "0")
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
