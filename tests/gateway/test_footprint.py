"""What a serving gateway holds: `onetool serve` without OAuth servers, on a fresh store or one at this code's
head, imports neither Alembic nor the SDK's OAuth client (PyJWT and cryptography's x509 with it), and on SQLite
not SQLAlchemy's PostgreSQL dialect. They cost about 16 MiB resident for the gateway's whole life; a stray
top-level import would bring them back silently."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from tests.conftest import FIXTURES, PYTHON, free_port
from tests.gateways import write_config

OPTIONAL = (
    "alembic",
    "jwt",
    "keyring",
    "onetool.auth.assertion",
    "onetool.auth.provider",
    "sqlalchemy.dialects.postgresql",
)

# `onetool serve` over stdio returns at stdin's end, once the gateway has started: every upstream connected
# (or failed) and the faces built. The HTTP front's modules are imported too, as `serve --http` would.
_SERVE = """
import json, sys
import onetool.serve.admin
from onetool.cli import main
status = main(["serve", "--config", sys.argv[1], "--log-level", "ERROR"])
print(json.dumps({"status": status, "loaded": [m for m in sys.argv[2:] if m in sys.modules]}))
"""


def serve_once(folder: Path, servers: dict[str, Any]) -> list[str]:
    """Run `onetool serve` on these servers until stdin ends; the modules of OPTIONAL it imported."""
    config = write_config(folder, {"servers": servers})
    done = subprocess.run(
        [PYTHON, "-c", _SERVE, str(config), *OPTIONAL],
        input="",  # a pipe that ends at once (the stdio pump cannot poll /dev/null)
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    report = json.loads(done.stdout)
    assert report["status"] == 0, done.stderr
    return report["loaded"]


async def test_serve_without_oauth_servers_imports_neither_alembic_nor_the_oauth_client(
    tmp_path: Path, everything_http: str
) -> None:
    servers = {
        "web": {"url": everything_http},
        "fx": {"command": PYTHON, "args": [str(FIXTURES / "fault_server.py"), "ok"]},
    }
    assert serve_once(tmp_path, servers) == [], "the first start, which creates the default store"
    assert serve_once(tmp_path, servers) == [], "a start on the store at head"


async def test_an_oauth_server_brings_the_oauth_client(tmp_path: Path) -> None:
    # nothing listens there: the server fails to connect, but its OAuth provider is built all the same
    servers = {"secured": {"url": f"http://127.0.0.1:{free_port()}/mcp", "oauth": {}, "connect_timeout": 2}}
    assert serve_once(tmp_path, servers) == ["jwt", "onetool.auth.assertion", "onetool.auth.provider"]  # no keyring
