"""A replica started while its PostgreSQL cannot be reached waits for it, unready, instead of exiting: /health says
the store is unreachable, /ready and every MCP request answer 503, and once the database answers the gateway starts
and serves. A database that refuses the replica (no such database) is a startup error, at once."""

from __future__ import annotations

import contextlib
import json
import signal
import socket
import socketserver
import subprocess
import threading
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import free_port
from tests.gateways import ONETOOL, get, origin, start_http_gateway, stop, text_of, until, write_config
from tests.postgres import create_database
from tests.replicas.conftest import fx_spec

ADMIN_TOKEN = "outage-admin-token"


class _Pipe(socketserver.BaseRequestHandler):
    target: tuple[str, int]
    live: set[socket.socket]

    def handle(self) -> None:
        with socket.create_connection(self.target) as upstream:
            self.live.update((upstream, self.request))
            back = threading.Thread(target=_copy, args=(upstream, self.request), daemon=True)
            back.start()
            _copy(self.request, upstream)
            back.join()


def _copy(source: socket.socket, sink: socket.socket) -> None:
    try:
        while data := source.recv(65536):
            sink.sendall(data)
        sink.shutdown(socket.SHUT_WR)
    except OSError:
        pass


class _Listener(socketserver.ThreadingTCPServer):
    allow_reuse_address = True  # reopened on the same port after close()
    daemon_threads = True


class Forwarder:
    """A loopback port where "the database" is down (nothing listens) until :meth:`open` forwards it to ``port``."""

    def __init__(self, port: int) -> None:
        self.port = free_port()
        self._live: set[socket.socket] = set()
        handler = type("Pipe", (_Pipe,), {"target": ("127.0.0.1", port), "live": self._live})
        self._handler = handler
        self._server: _Listener | None = None

    def open(self) -> None:
        self._server = _Listener(("127.0.0.1", self.port), self._handler)
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def close(self) -> None:
        """The database goes down: no new connection, and the open ones are cut."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        for open_socket in list(self._live):
            with contextlib.suppress(OSError):
                open_socket.shutdown(socket.SHUT_RDWR)
        self._live.clear()


@pytest.fixture
def database(postgres: str) -> Iterator[tuple[str, Forwarder]]:
    """A fresh database, and its URL through a port that refuses connections until the test opens it."""
    url = create_database(postgres, f"outage_{uuid.uuid4().hex[:12]}")
    port = int(postgres.rsplit(":", 1)[1])
    forwarder = Forwarder(port)
    try:
        yield url.replace(f":{port}/", f":{forwarder.port}/"), forwarder
    finally:
        forwarder.close()


def disable_fx(url: str) -> tuple[int, str | None, dict[str, Any]]:
    """An admin write: (status, Retry-After, the JSON body)."""
    headers = {"Authorization": f"Bearer {ADMIN_TOKEN}", "Content-Type": "application/json"}
    request = urllib.request.Request(origin(url) + "/admin/servers/fx/disable", method="POST", headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, response.headers.get("Retry-After"), json.loads(response.read())
    except urllib.error.HTTPError as e:
        return e.code, e.headers.get("Retry-After"), json.loads(e.read())


def mcp_post(url: str) -> tuple[int, str | None]:
    request = urllib.request.Request(url, data=b"{}", method="POST", headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.headers.get("Retry-After")
    except urllib.error.HTTPError as e:
        return e.code, e.headers.get("Retry-After")


async def test_a_replica_started_before_its_database_waits_unready_then_serves(
    tmp_path: Path, database: tuple[str, Forwarder]
) -> None:
    url, forwarder = database
    config = {"servers": {"fx": fx_spec()}, "state": {"url": url}, "http": {"admin_token": ADMIN_TOKEN}}
    served = start_http_gateway(tmp_path, config, f"outage-{uuid.uuid4().hex}", settle=False)
    try:
        assert get(served.url, "/health") == (
            200,
            {"status": "ok", "servers": {}, "store": "unreachable", "draining": False},
        )
        assert get(served.url, "/ready") == (
            503,
            {"ready": False, "not_ready": [{"name": "state store", "status": "unreachable"}]},
        )
        assert get(served.url, "/status")[1]["servers"] == []  # which servers exist is in the store
        assert mcp_post(served.url) == (503, "5")
        assert served.proc.poll() is None

        forwarder.open()
        until(lambda: get(served.url, "/ready")[0] == 200, timeout=30)
        assert get(served.url, "/health")[1]["store"] == "ok"
        assert text_of(await served.run("fx.echo(message='up')")) == "echo: up"
        log = served.log.read_text()
        assert "cannot open it: Connect call failed" in log and "serving unready (/ready answers 503)" in log
        assert "the state store can be read: starting the gateway" in log

        # The database goes down while serving: a write changes nothing and says so, with when to try again.
        forwarder.close()
        status, retry_after, body = disable_fx(served.url)
        assert (status, retry_after) == (503, "5"), body
        assert body["error"].startswith("state store ") and "'fx'" in body["error"], body
        forwarder.open()
        status, _, body = until(lambda: (answer := disable_fx(served.url))[0] != 503 and answer, timeout=30)
        assert status == 200 and body["enabled"] is False, body
        # the URL went to stdout once, when the unready front served, not again when the gateway did
        assert served.proc.stdout is not None
        served.proc.send_signal(signal.SIGTERM)
        assert served.proc.wait(timeout=15) == 0
        assert served.url not in served.proc.stdout.read()
    finally:
        stop(served.proc)


def test_a_signal_stops_a_replica_that_waits_for_its_database(tmp_path: Path, database: tuple[str, Forwarder]) -> None:
    url, _never_opened = database
    served = start_http_gateway(tmp_path, {"state": {"url": url}}, f"outage-{uuid.uuid4().hex}", settle=False)
    try:
        assert get(served.url, "/ready")[0] == 503
        served.proc.send_signal(signal.SIGTERM)
        assert served.proc.wait(timeout=10) == 0
    finally:
        stop(served.proc)


def test_a_database_that_refuses_the_replica_is_a_startup_error(postgres: str, tmp_path: Path) -> None:
    path = write_config(tmp_path, {"state": {"url": f"{postgres}/no_such_database"}})
    done = subprocess.run(
        [ONETOOL, "serve", "--http", "--port", "0", "--config", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2, done
    assert 'database "no_such_database" does not exist' in done.stderr
    assert done.stdout == ""  # it never served: no URL printed
