"""A real gateway for end-to-end tests: `onetool serve` with real upstreams and a colliding local pack. The
`gateway` fixture (tests/conftest.py) serves one per test package."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import yaml
from mcp import Client, types

from tests import processes
from tests.conftest import EVERYTHING_JS, FIXTURES, PYTHON, TIME_SERVER
from tests.processes import START_DEADLINE, start_and_read_line

ONETOOL = str(Path(sys.executable).with_name("onetool"))


def gateway_config(marker: str, **sandbox: Any) -> dict[str, Any]:
    """server-everything as `brave` (collides with packs/brave.py), mcp-server-time, the fault fixture
    server as `fx` (a Python-SDK server), a broken and a disabled server.

    ``marker`` is put in every child's environment so a test can find leftover processes.
    """
    env = {"ONETOOL_TEST_MARKER": marker}
    return {
        "servers": {
            "brave": {"command": "node", "args": [str(EVERYTHING_JS), "stdio"], "env": env, "timeout": 3},
            "time": {"command": TIME_SERVER, "args": ["--local-timezone", "UTC"], "env": env},
            "fx": {"command": PYTHON, "args": [str(FIXTURES / "fault_server.py"), "ok"], "env": env},
            "broken-server": {"command": "/nonexistent/mcp-server", "connect_timeout": 5},
            "off": {"command": "node", "enabled": False},
        },
        "packs": {"dirs": [str(FIXTURES / "packs")]},
        "sandbox": {"timeout": 5, **sandbox},
    }


def write_config(folder: Path, config: dict[str, Any]) -> Path:
    path = folder / "onetool.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def processes_with(marker: str) -> list[int]:
    """PIDs whose environment carries ``marker``: children a gateway started and must have reaped."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as f:
                if marker.encode() in f.read():
                    found.append(int(entry))
        except OSError:
            continue
    return found


class ServedGateway:
    def __init__(self, proc: subprocess.Popen[str], url: str, marker: str, log: Path) -> None:
        self.proc, self.url, self.marker, self.log = proc, url, marker, log

    async def run(self, code: str, mode: str = "auto") -> types.CallToolResult:
        async with Client(self.url, mode=mode, read_timeout_seconds=60) as client:  # type: ignore[arg-type]
            return await client.call_tool("run", {"code": code})


def start_http_gateway(
    folder: Path,
    config: dict[str, Any],
    marker: str,
    *extra: str,
    env: dict[str, str] | None = None,
    preexec_fn: Callable[[], None] | None = None,
    settle: bool = True,
) -> ServedGateway:
    """`onetool serve --http` on a free port, once it printed its URL. The servers connect behind the front:
    ``settle`` also waits until each connected or failed once (``proxy.init``), as most tests expect."""
    path = write_config(folder, config)
    log = folder / "gateway.log"
    # A gateway restarted on the same folder appends to the same log: only what this one writes counts.
    written = log.stat().st_size if log.exists() else 0
    proc, url = start_and_read_line(
        [ONETOOL, "serve", "--http", "--port", "0", "--config", str(path), "--log-file", str(log), *extra],
        stderr=folder / "gateway.stderr",
        env={**os.environ, "LOG_LEVEL": "DEBUG", **(env or {})},
        preexec_fn=preexec_fn,
    )
    assert url.startswith(("http://127.0.0.1:", "https://127.0.0.1:")), (
        f"no URL printed: {url!r}; log: {log.read_text() if log.exists() else ''}"
    )
    if settle:
        wait_for_record(log, "proxy.init", after=written)
    return ServedGateway(proc, url, marker, log)


def origin(url: str) -> str:
    """The gateway's base URL, from its /mcp URL."""
    return url.rsplit("/mcp", 1)[0]


def wait_for_record(log: Path, text: str, timeout: float = START_DEADLINE, after: int = 0) -> None:
    """Until ``text`` is in the log file past its first ``after`` bytes, e.g. ``proxy.init``: every server
    connected or failed once."""
    deadline = time.monotonic() + timeout
    while text not in (log.read_bytes()[after:].decode("utf-8", "replace") if log.exists() else ""):
        assert time.monotonic() < deadline, f"no {text!r} in {log} within {timeout} s"
        time.sleep(0.05)


def get(url: str, path: str, token: str | None = None) -> tuple[int, Any]:
    """GET ``path`` on the gateway serving ``url``: the status and the JSON body."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    try:
        with urllib.request.urlopen(urllib.request.Request(origin(url) + path, headers=headers), timeout=30) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def until(check: Any, timeout: float = 20.0) -> Any:
    """Poll ``check()`` until it returns something true (returned), for at most ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not (found := check()):
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)
    return found


@contextmanager
def auth_command(config: Path, name: str, env: dict[str, str]) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    """`onetool auth NAME` (no browser), the authorization URL it printed, and the process, still waiting for the
    redirect; killed on the way out if it still runs, so a failed assertion leaves nothing behind."""
    env = {key: value for key, value in env.items() if key != "DISPLAY"}
    cmd = [ONETOOL, "auth", name, "--config", str(config)]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        url = next((line.strip() for line in proc.stdout if line.strip().startswith("http")), None)
        if url is None:
            raise AssertionError(f"no authorization URL printed: {proc.communicate(timeout=10)}")
        yield url, proc
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


def stop(proc: subprocess.Popen[str]) -> int:
    """SIGTERM, as a service manager would; the exit status it ends with. One that does not stop within 10 s
    fails the test, killed."""
    assert processes.stop(proc), f"{proc.args} did not stop within 10 s of SIGTERM (killed)"
    return proc.returncode


def text_of(result: types.CallToolResult) -> str:
    return "\n".join(c.text for c in result.content if isinstance(c, types.TextContent))
