"""Where the console is served: on loopback by default, not on a plain-HTTP listener elsewhere (the admin token
would cross the network in the clear) unless ui.allow_plain_http says so, and nowhere with http.ui: false."""

from __future__ import annotations

import os
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from tests.gateways import ONETOOL, stop, write_config
from tests.processes import start_and_read_line


def console_status(folder: Path, host: str, config: dict[str, Any]) -> tuple[int, str]:
    """GET /ui/login on a gateway bound to ``host`` (with a token): its status, and the gateway's log."""
    path = write_config(folder, config)
    log = folder / "gateway.log"
    proc, url = start_and_read_line(
        [ONETOOL, "serve", "--http", "--host", host, "--port", "0", "--config", str(path), "--log-file", str(log)],
        env={**os.environ, "ONETOOL_TOKEN": "t0ken"},
    )
    try:
        port = url.rsplit(":", 1)[1].split("/")[0]
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/ui/login", timeout=30) as response:
                status = response.status
        except urllib.error.HTTPError as e:
            status = e.code
    finally:
        assert stop(proc) == 0
    return status, log.read_text()


@pytest.mark.parametrize(
    ("host", "config", "status"),
    [
        ("127.0.0.1", {}, 200),
        ("127.0.0.1", {"http": {"ui": False}}, 404),
        ("0.0.0.0", {"http": {"ui": True}}, 404),
        ("0.0.0.0", {"ui": {"allow_plain_http": True}}, 200),
    ],
)
def test_the_console_is_served_only_where_its_token_cannot_be_read_on_the_way(
    tmp_path: Path, host: str, config: dict[str, Any], status: int
) -> None:
    served, log = console_status(tmp_path, host, config)
    assert served == status
    refused = "not serving /ui" in log
    assert refused is (config == {"http": {"ui": True}})
