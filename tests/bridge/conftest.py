"""The bridge as a real process (`onetool bridge --port 0 ...`), its API, MCP clients of it, and a process census."""

from __future__ import annotations

import contextlib
import os
import random
import shutil
import socket
import ssl
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from tests.conftest import EVERYTHING_JS, TIME_SERVER
from tests.processes import start_and_read_line, stop
from tests.tls import Pki, client_context
from tests.upstream.conftest import FAULT_SERVER, _stat, all_pids

TOKEN = "bridge-test-token"
ONETOOL = str(Path(sys.executable).with_name("onetool"))


def everything(name: str = "everything", **extra: Any) -> dict[str, Any]:
    """A POST /convert body for server-everything over stdio."""
    return {"serverName": name, "command": "node", "args": [str(EVERYTHING_JS), "stdio"], **extra}


def fault(name: str, mode: str = "ok", **extra: Any) -> dict[str, Any]:
    """A POST /convert body for the fault fixture server (tests/fixtures/fault_server.py) in ``mode``."""
    return {"serverName": name, "command": sys.executable, "args": [FAULT_SERVER, mode], **extra}


def time_server(name: str = "time") -> dict[str, Any]:
    return {"serverName": name, "command": TIME_SERVER, "args": ["--local-timezone", "UTC"]}


@dataclass
class BridgeProcess:
    process: subprocess.Popen[str]
    url: str
    log: Path
    token: str | None
    verify: ssl.SSLContext | bool = True
    """How its API's certificate is verified (a bridge serving HTTPS with a test CA: a context trusting that CA)."""

    @property
    def pid(self) -> int:
        return self.process.pid

    def api(
        self, method: str, path: str, *, token: str | None = "default", headers: dict[str, str] | None = None, **kw: Any
    ) -> httpx2.Response:
        token = self.token if token == "default" else token
        headers = ({"Authorization": f"Bearer {token}"} if token else {}) | (headers or {})
        return httpx2.request(method, f"{self.url}{path}", headers=headers, timeout=60, verify=self.verify, **kw)

    def convert(self, body: dict[str, Any]) -> dict[str, Any]:
        response = self.api("POST", "/convert", json=body)
        assert response.status_code == 201, response.text
        return dict(response.json())

    def children(self) -> dict[int, str]:
        """The bridge's live child processes: pid -> state."""
        return {pid: st[0] for pid in all_pids() if (st := _stat(pid)) is not None and st[1] == self.pid}

    def stop(self, timeout: float = 10.0) -> float:
        """SIGTERM; seconds until the process exited."""
        started = time.monotonic()
        if not stop(self.process, timeout):  # killed: the test fails, and leaves no bridge behind
            raise subprocess.TimeoutExpired(self.process.args, timeout)
        return time.monotonic() - started


def start_bridge(
    tmp: Path, *args: str, token: str | None = TOKEN, prefix: Sequence[str] = (), pki: Pki | None = None
) -> BridgeProcess:
    """``prefix``: what runs the bridge (``ip netns exec NS``: in a network namespace; it execs, same pid).
    ``pki``: serve HTTPS with its certificate (``--tls-cert``/``--tls-key``); the API is verified with its CA."""
    log = tmp / f"bridge-{time.monotonic_ns()}.log"
    env = {k: v for k, v in os.environ.items() if k != "ONETOOL_BRIDGE_TOKEN"}
    command = [*prefix, ONETOOL, "bridge", "--port", "0", "--log-file", str(log), "--log-level", "DEBUG", *args]
    if token:
        command += ["--token", token]
    if pki is not None:
        command += ["--tls-cert", str(pki.cert), "--tls-key", str(pki.key)]
    process, line = start_and_read_line(command, stderr=log.with_suffix(".stderr"), env=env)
    scheme = "https" if pki is not None else "http"
    assert line.startswith(f"{scheme}://"), f"the bridge printed {line!r}, not its {scheme} URL"
    return BridgeProcess(process, line, log, token, client_context(pki.ca) if pki is not None else True)


@pytest.fixture
def bridge_factory(tmp_path: Path) -> Iterator[Any]:
    """start(*args) -> a running bridge, stopped (and its exit checked) at the end of the test."""
    started: list[BridgeProcess] = []

    def start(
        *args: str, token: str | None = TOKEN, prefix: Sequence[str] = (), pki: Pki | None = None
    ) -> BridgeProcess:
        bridge = start_bridge(tmp_path, *args, token=token, prefix=prefix, pki=pki)
        started.append(bridge)
        return bridge

    yield start
    hung = []
    for bridge in started:
        if bridge.process.poll() is None:
            try:
                bridge.stop()
            except subprocess.TimeoutExpired:
                hung.append(bridge.pid)
    assert not hung, f"bridges that did not stop on SIGTERM (killed): {hung}"


@pytest.fixture(scope="module")
def bridge(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BridgeProcess]:
    """One bridge for a whole module (base port 0: any free port)."""
    process = start_bridge(tmp_path_factory.mktemp("bridge"), "--base-port", "0")
    yield process
    process.stop()


@asynccontextmanager
async def mcp_client(
    url: str, mode: str = "auto", token: str | None = TOKEN, verify: ssl.SSLContext | bool = True, **kwargs: Any
) -> AsyncIterator[Client]:
    """An MCP client of a bridged URL, with the bearer header on an httpx2 client."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=300), verify=verify) as http:
        transport = streamable_http_client(url, http_client=http)
        async with Client(transport, mode=mode, read_timeout_seconds=30, **kwargs) as client:  # type: ignore[arg-type]
            yield client


def process_groups(pids: set[int]) -> list[int]:
    """Live processes (not zombies) in the process groups led by ``pids``."""
    return [pid for pid in all_pids() if (st := _stat(pid)) is not None and st[2] in pids and st[0] != "Z"]


def wait_until(condition: Any, timeout: float = 15.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.05)


async def until(condition: Any, timeout: float = 15.0, what: str = "condition") -> None:
    """:func:`wait_until` that lets the test's own background tasks run meanwhile."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        await anyio.sleep(0.05)


class Relay:
    """A TCP relay from 127.0.0.1:``port`` to ``target``: the way to the bridge, :meth:`cut` (connections refused)
    and restored (:meth:`restore`) on the same port, while the bridge itself keeps running."""

    def __init__(self, target: tuple[str, int]) -> None:
        self._target = target
        self._lock = threading.Lock()
        self._sockets: list[socket.socket] = []
        self._listening: socket.socket | None = None
        self.port = 0
        self.restore()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def restore(self) -> None:
        listening = socket.socket()
        listening.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listening.bind(("127.0.0.1", self.port))
        listening.listen(16)
        self.port = listening.getsockname()[1]
        self._listening = listening
        threading.Thread(target=self._accept, args=(listening,), daemon=True).start()

    def cut(self) -> None:
        """Refuse new connections and end the open ones."""
        with self._lock:
            sockets, self._sockets = self._sockets, []
            if self._listening is not None:
                sockets.append(self._listening)
                self._listening = None
        for sock in sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()

    def _accept(self, listening: socket.socket) -> None:
        while True:
            try:
                client, _ = listening.accept()
            except OSError:
                return  # cut
            try:
                upstream = socket.create_connection(self._target, timeout=10)
            except OSError:
                client.close()
                continue
            upstream.settimeout(None)
            with self._lock:
                self._sockets += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    @staticmethod
    def _pump(source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        finally:
            with contextlib.suppress(OSError):
                sink.shutdown(socket.SHUT_WR)


@dataclass
class Netns:
    """A network namespace joined to this one by a veth pair: ``address`` inside it, ``host_address`` here."""

    name: str
    address: str
    host_address: str

    @property
    def exec(self) -> list[str]:
        return ["ip", "netns", "exec", self.name]


def _ip(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", *args], capture_output=True, text=True, timeout=10, check=False)


@pytest.fixture
def netns() -> Iterator[Netns]:
    """A fresh network namespace with loopback up and a veth pair to it (a /30 in 10.213.x.0); skipped, with the
    reason, where one cannot be made (not root, no `ip`, no namespace or veth support)."""
    if os.geteuid() != 0:
        pytest.skip("a network namespace needs root")
    if shutil.which("ip") is None:
        pytest.skip("no `ip` command (iproute2) to make a network namespace")
    tag = f"{os.getpid() % 10000}{random.randrange(1000):03d}"
    name, host_if, ns_if = f"otb-{tag}", f"otb{tag}h", f"otb{tag}n"
    used = _ip("-4", "-o", "addr").stdout
    subnet = next((f"10.213.{x}" for x in random.sample(range(256), 256) if f"10.213.{x}." not in used), None)
    if subnet is None:
        pytest.skip("no free 10.213.x.0/30 subnet for the namespace's veth pair")
    steps = [
        ("netns", "add", name),
        ("link", "add", host_if, "type", "veth", "peer", "name", ns_if),
        ("link", "set", ns_if, "netns", name),
        ("addr", "add", f"{subnet}.1/30", "dev", host_if),
        ("link", "set", host_if, "up"),
        ("-n", name, "addr", "add", f"{subnet}.2/30", "dev", ns_if),
        ("-n", name, "link", "set", ns_if, "up"),
        ("-n", name, "link", "set", "lo", "up"),
    ]
    try:
        for step in steps:
            done = _ip(*step)
            if done.returncode != 0:
                pytest.skip(f"cannot make a network namespace here: `ip {' '.join(step)}`: {done.stderr.strip()}")
        yield Netns(name, f"{subnet}.2", f"{subnet}.1")
    finally:
        _ip("link", "del", host_if)  # its peer goes with it
        _ip("netns", "del", name)
