"""Shared fixtures: where the reference servers live, HTTP-mode server-everything, log capture."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from loguru import logger

from onetool.logs import setup_logging
from tests.processes import stop

if TYPE_CHECKING:
    from tests.gateways import ServedGateway

TESTS = Path(__file__).resolve().parent
FIXTURES = TESTS / "fixtures"
EVERYTHING_JS = TESTS / "node_modules" / "@modelcontextprotocol" / "server-everything" / "dist" / "index.js"
PYTHON = sys.executable
TIME_SERVER = str(Path(sys.executable).with_name("mcp-server-time"))


@pytest.fixture(scope="session", autouse=True)
def _private_state_folders(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """No test (nor any gateway or CLI it starts) reads or writes the user's state store or discovery file."""
    base = tmp_path_factory.mktemp("onetool-home")
    saved = {k: os.environ.get(k) for k in ("ONETOOL_STATE_DIR", "ONETOOL_RUNTIME_DIR")}
    os.environ["ONETOOL_STATE_DIR"], os.environ["ONETOOL_RUNTIME_DIR"] = str(base / "state"), str(base / "run")
    yield
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


@pytest.fixture(autouse=True)
def _own_state_folders(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test its own store and runtime folder: a gateway shared by a package (started with the session's
    folders) is not attached to by a test's `onetool run`, and one test's overrides do not leak into another."""
    base = tmp_path_factory.mktemp("state")
    monkeypatch.setenv("ONETOOL_STATE_DIR", str(base / "state"))
    monkeypatch.setenv("ONETOOL_RUNTIME_DIR", str(base / "run"))


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def serve_on_a_free_port(
    start: Callable[[int], subprocess.Popen[Any]], answers: Callable[[int], bool], timeout: float = 15.0
) -> tuple[subprocess.Popen[Any], int]:
    """A server started on a port that was free a moment before, and its port, once ``answers(port)`` shows that
    this server is the one listening there. Between :func:`free_port` and the server's bind, another process may
    take the port (the kernel hands a ``--port 0`` listener the same ephemeral ports): then the server exits
    (address in use), or someone else answers, and it is started again on another port."""
    for _ in range(3):
        port = free_port()
        proc = start(port)
        deadline = time.monotonic() + timeout
        while proc.poll() is None and time.monotonic() < deadline:
            if answers(port):
                return proc, port
            time.sleep(0.05)
        if proc.poll() is None:
            proc.kill()
            proc.wait()
            raise TimeoutError(f"the server on 127.0.0.1:{port} did not answer within {timeout} s")
    raise RuntimeError("three free ports in a row were taken before the server could bind one")


def wait_for_port(port: int, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise TimeoutError(f"nothing listening on 127.0.0.1:{port} after {timeout}s")


def _serve_everything(mode: str) -> Iterator[int]:
    port = free_port()
    proc = subprocess.Popen(
        ["node", str(EVERYTHING_JS), mode],
        env={**os.environ, "PORT": str(port)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        wait_for_port(port)
        yield port
    finally:
        stop(proc, 5)


@pytest.fixture(scope="session")
def everything_http() -> Iterator[str]:
    """server-everything over streamable HTTP; yields its URL."""
    for port in _serve_everything("streamableHttp"):
        yield f"http://127.0.0.1:{port}/mcp"


@pytest.fixture(scope="session")
def everything_sse() -> Iterator[str]:
    """server-everything over SSE; yields its URL."""
    for port in _serve_everything("sse"):
        yield f"http://127.0.0.1:{port}/sse"


@pytest.fixture
def everything_stdio() -> dict[str, Any]:
    """A `servers:` entry that runs server-everything over stdio."""
    return {"command": "node", "args": [str(EVERYTHING_JS), "stdio"]}


@pytest.fixture
def time_stdio() -> dict[str, Any]:
    """A `servers:` entry that runs mcp-server-time (a 2026-07-28 era server) over stdio."""
    return {"command": TIME_SERVER, "args": ["--local-timezone", "UTC"]}


@pytest.fixture
def log_records() -> Iterator[list[dict[str, Any]]]:
    """Every loguru record emitted during the test, as {level, message, extra, traced} dicts (traced: it carries
    an exception's traceback)."""
    records: list[dict[str, Any]] = []

    def sink(message: Any) -> None:
        r = message.record
        traced = r["exception"] is not None
        records.append({"level": r["level"].name, "message": r["message"], "extra": dict(r["extra"]), "traced": traced})

    handler = logger.add(sink, level="DEBUG")
    try:
        yield records
    finally:
        logger.remove(handler)


def spans(records: list[dict[str, Any]], name: str) -> list[dict[str, Any]]:
    """The `extra` of every LogSpan record called `name`."""
    return [r["extra"] for r in records if r["extra"].get("span") == name]


@contextmanager
def restoring_logging() -> Iterator[None]:
    """Whatever the block sets up, loguru's defaults afterwards, as the other tests expect."""
    try:
        yield
    finally:
        logger.remove()
        logger.configure(patcher=lambda record: None)
        logger.add(sys.stderr)


@contextmanager
def logging_as_configured(**options: Any) -> Iterator[None]:
    """Logging as the gateway sets it up (``setup_logging("INFO", **options)``) for the block."""
    with restoring_logging():
        setup_logging("INFO", **options)
        yield


@pytest.fixture(scope="package")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServedGateway]:
    """One `onetool serve --http --port 0` (tests.gateways.gateway_config) for the package's tests."""
    from tests.gateways import gateway_config, start_http_gateway
    from tests.gateways import stop as stop_gateway

    marker = f"gw-{uuid.uuid4().hex}"
    served = start_http_gateway(tmp_path_factory.mktemp("gateway"), gateway_config(marker), marker)
    try:
        yield served
    finally:
        stop_gateway(served.proc)


@pytest.fixture(scope="session")
def postgres() -> Iterator[str]:
    """A scratch PostgreSQL server (tests.postgres) for the session; yields its base URL (no database name)."""
    from tests.postgres import missing, scratch_postgres

    if (why := missing()) is not None:
        pytest.skip(why)
    with scratch_postgres() as url:
        yield url
