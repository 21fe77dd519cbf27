"""How the CLI talks to a running gateway: its admin API, over the standard library only.

This path must stay fast (``onetool run -c`` in well under a second), so it imports neither ``mcp`` nor
pydantic nor anyio: the gateway is found through the discovery file (or ``--url``) and asked over HTTP.
"""

from __future__ import annotations

import http.client
import json
import os
import socket
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, urlsplit

from onetool import discovery
from onetool.errors import AttachError, NotRunning

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

    def request(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        """Send one admin request (as the CLI); its JSON answer, or AttachError / NotRunning."""
        parts = urlsplit(self.origin)
        kind = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
        conn = kind(parts.hostname or "127.0.0.1", parts.port, timeout=TIMEOUT)
        payload = json.dumps(body).encode() if body is not None else None
        headers = {"Authorization": f"Bearer {self.token}", ACTOR_HEADER: "cli", "Content-Type": "application/json"}
        try:
            conn.request(method, path, body=payload, headers=headers)
            response = conn.getresponse()
            raw = response.read()
        except (ConnectionRefusedError, socket.gaierror) as e:
            raise NotRunning(f"no gateway answers at {self.origin}: {e}") from None
        except OSError as e:
            raise AttachError(f"the gateway at {self.origin} did not answer: {e}", 0) from None
        finally:
            conn.close()
        try:
            data = json.loads(raw) if raw else None
        except ValueError:
            data = None
        if response.status >= 400:
            if isinstance(data, dict):
                message = data.get("error_description") or data.get("error") or raw.decode(errors="replace")
            else:
                message = raw.decode(errors="replace")
            raise AttachError(str(message), response.status)
        return data


def server_path(name: str, action: str | None = None) -> str:
    path = f"/admin/servers/{quote(name, safe='')}"
    return f"{path}/{action}" if action else path


def find(url: str | None = None, token: str | None = None) -> Target | None:
    """The gateway to talk to: at ``url`` if given, else at ``$ONETOOL_URL``, else the one the discovery file
    names; None if none is.

    The token: ``token`` if given, else the discovery file's (when it names this gateway), else
    ``$ONETOOL_ADMIN_TOKEN``. A gateway given by URL without any token is an AttachError.
    """
    found = discovery.read()
    url = url or os.environ.get(ENV_URL) or None
    if url is None:
        if found is None:
            return None
        url = found.url
    origin = _origin(url)
    if token is None and found is not None and _origin(found.url) == origin:
        token = found.admin_token
    token = token or os.environ.get(ENV_ADMIN_TOKEN)
    if not token:
        raise AttachError(f"no admin token for {origin}: pass --token or set ${ENV_ADMIN_TOKEN}", 401)
    return Target(origin, token)


def _origin(url: str) -> str:
    parts = urlsplit(url if "//" in url else f"http://{url}")
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise AttachError(f"not a gateway URL: {url!r} (expected http://HOST:PORT)", 400)
    return f"{parts.scheme}://{parts.netloc}"
