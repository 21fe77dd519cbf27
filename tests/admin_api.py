"""Helpers for tests of a served gateway's control plane: its discovery record, its admin API, the CLI."""

from __future__ import annotations

import json
import os
import subprocess
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from tests.gateways import ONETOOL, origin


def discovered() -> dict[str, Any]:
    """The discovery file of the gateway this test started (its runtime folder is the test's own: one gateway)."""
    [file] = (Path(os.environ["ONETOOL_RUNTIME_DIR"]) / "gateways").glob("*.json")
    return json.loads(file.read_text())


def admin(url: str, method: str, path: str, body: Any = None, token: str | None = "") -> tuple[int, Any]:
    """One request to the gateway at ``url``: (status, JSON). ``token`` "" means the discovery file's."""
    headers = {"Content-Type": "application/json"}
    token = discovered()["admin_token"] if token == "" else token
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(origin(url) + path, data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, json.loads(response.read() or b"null")
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null")


def cli(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """The onetool command, with the test's state and runtime folders, and no config but the one it is given: no
    $ONETOOL_CONFIG, and run in ``cwd``, by default the test's own folder, where no ./onetool.yaml is (the
    repository's would be)."""
    base = {k: v for k, v in os.environ.items() if k != "ONETOOL_CONFIG"}
    here = cwd or Path(os.environ["ONETOOL_STATE_DIR"]).parent
    command = [ONETOOL, *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=60, env={**base, **(env or {})}, cwd=here)
