"""How the CLI talks to a running gateway: its admin API, over the standard library only.

This path must stay fast (``onetool run -c`` in well under a second), so it imports neither ``mcp`` nor
pydantic nor anyio: the gateway is found through the discovery file of the command's config (or ``--url``) and
asked over HTTP.
"""

from __future__ import annotations

import http.client
import json
import os
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

from onetool.attach import discovery
from onetool.errors import AttachError, NotRunning, SeveralGateways

__all__ = ["ACTOR_HEADER", "ENV_ADMIN_TOKEN", "ENV_URL", "TIMEOUT", "Target", "find", "server_path"]

ENV_ADMIN_TOKEN = "ONETOOL_ADMIN_TOKEN"
ENV_URL = "ONETOOL_URL"
"""The running gateway's URL, for commands given no --url."""
ACTOR_HEADER = "X-OneTool-Actor"  # onetool.serve.admin.ACTOR_HEADER, not imported: that module imports mcp
TIMEOUT = 600.0
"""Seconds to wait for an answer: a snippet may run long, an added server may take its connect timeout."""


@dataclass(frozen=True)
class Target:
    origin: str
    """scheme://host:port of the gateway."""
    token: str = field(repr=False)
    note: str = ""
    """Said to the user when this is not the gateway of the command's config (there was none to name)."""

    def request(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        """Send one admin request (as the CLI); its JSON answer, or AttachError / NotRunning."""
        with self._exchange(method, path, body) as response:
            try:
                raw = response.read()
            except OSError as e:
                raise AttachError(f"the gateway at {self.origin} did not answer: {e}", 0) from None
        try:
            return json.loads(raw) if raw else None
        except ValueError:
            return None

    def lines(self, method: str, path: str, body: dict[str, Any] | None = None) -> Iterator[Any]:
        """Send one admin request whose answer is NDJSON (``POST /admin/run`` with progress); each line's JSON as
        it arrives."""
        with self._exchange(method, path, body) as response:
            try:
                while line := response.readline():
                    yield json.loads(line)
            except (OSError, http.client.HTTPException) as e:
                raise AttachError(f"the gateway at {self.origin} stopped answering: {e}", 0) from None

    @contextmanager
    def _exchange(self, method: str, path: str, body: dict[str, Any] | None) -> Iterator[http.client.HTTPResponse]:
        """The response to one admin request, its status checked: AttachError for 400 and above, NotRunning when
        nothing listens."""
        parts = urlsplit(self.origin)
        kind = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
        conn = kind(parts.hostname or "127.0.0.1", parts.port, timeout=TIMEOUT)
        payload = json.dumps(body).encode() if body is not None else None
        headers = {"Authorization": f"Bearer {self.token}", ACTOR_HEADER: "cli", "Content-Type": "application/json"}
        try:
            try:
                conn.request(method, path, body=payload, headers=headers)
                response = conn.getresponse()
            except (ConnectionRefusedError, socket.gaierror) as e:
                raise NotRunning(f"no gateway answers at {self.origin}: {e}") from None
            except OSError as e:
                raise AttachError(f"the gateway at {self.origin} did not answer: {e}", 0) from None
            if response.status >= 400:
                raise AttachError(_failure(response.read()), response.status)
            yield response
        finally:
            conn.close()


def _failure(raw: bytes) -> str:
    """What an admin API error answer says."""
    try:
        data = json.loads(raw) if raw else None
    except ValueError:
        data = None
    if isinstance(data, dict):
        return str(data.get("error_description") or data.get("error") or raw.decode(errors="replace"))
    return raw.decode(errors="replace")


def server_path(name: str, action: str | None = None) -> str:
    path = f"/admin/servers/{quote(name, safe='')}"
    return f"{path}/{action}" if action else path


def find(url: str | None = None, token: str | None = None, config: Path | None = None) -> Target | None:
    """The gateway to talk to: at ``url`` if given, else at ``$ONETOOL_URL``, else the one serving ``config`` (the
    command's config file); with no config file, the only gateway running, with a ``note`` that says which. None
    if there is none.

    The token: ``token`` if given, else the discovery file's of the gateway at that URL, else
    ``$ONETOOL_ADMIN_TOKEN``. A gateway given by URL without any token is an AttachError, and so is a command with
    no config file while several gateways run.
    """
    url = url or os.environ.get(ENV_URL) or None
    note = ""
    if url is None:
        found = discovery.read(discovery.discovery_file(config))
        if found is None and config is None:
            found = _only_gateway()
            if found is not None:
                note = f"attached to the only gateway running, {found.url}, which serves {found.config or 'no config'}"
        if found is None:
            return None
        url = found.url
    origin = _origin(url)
    if token is None:
        token = next((g.admin_token for g in discovery.running() if _origin(g.url) == origin), None)
    token = token or os.environ.get(ENV_ADMIN_TOKEN)
    if not token:
        raise AttachError(f"no admin token for {origin}: pass --token or set ${ENV_ADMIN_TOKEN}", 401)
    return Target(origin, token, note)


def _only_gateway() -> discovery.Discovery | None:
    running = discovery.running()
    if len(running) > 1:
        listed = "; ".join(f"{g.url} ({g.config or 'no config'})" for g in running)
        raise SeveralGateways(
            f"no config file here (--config, $ONETOOL_CONFIG or ./onetool.yaml) and {len(running)} gateways are "
            f"running: {listed}; name one with --config FILE or --url URL"
        )
    return running[0] if running else None


def _origin(url: str) -> str:
    parts = urlsplit(url if "//" in url else f"http://{url}")
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise AttachError(f"not a gateway URL: {url!r} (expected http://HOST:PORT)", 400)
    return f"{parts.scheme}://{parts.netloc}"
