"""The image's command, run for real: `onetool serve` with the image's arguments (only the port and the config's
path changed: a free port, deploy/onetool.yaml), the environment the Kubernetes Deployment gives (its Secret filled
in), on a scratch PostgreSQL. Every probe path the manifests name answers 200 on it; the image's HEALTHCHECK
command passes against it and fails against a closed port; an MCP client that sends the public Host and the token
runs code; and the Secret as shipped, with its empty values, keeps the gateway from serving at all.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from tests.conftest import free_port
from tests.deploy.manifests import (
    CONFIG,
    SECRET_VALUES,
    haproxy_section,
    healthcheck,
    healthcheck_url,
    image_argv,
    k8s_container,
    k8s_env,
    k8s_object,
    onetool_args,
    with_option,
)
from tests.gateways import ONETOOL, stop, text_of
from tests.postgres import PG_USER, create_database
from tests.processes import START_DEADLINE, start_and_read_line

pytestmark = pytest.mark.anyio


@dataclass(frozen=True)
class Deployed:
    port: int
    env: dict[str, str]

    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"


def served_args(port: int) -> list[str]:
    """The image's `onetool` arguments, on ``port`` and reading deploy/onetool.yaml."""
    args = onetool_args(image_argv())
    return with_option(with_option(args, "--port", str(port)), "--config", str(CONFIG))


def deployment_env(folder: Path, secrets: dict[str, str]) -> dict[str, str]:
    """The Deployment's environment with ``secrets`` in its Secret, and private state and runtime folders."""
    return {
        **os.environ,
        **k8s_env(secrets),
        "ONETOOL_STATE_DIR": str(folder / "state"),
        "ONETOOL_RUNTIME_DIR": str(folder / "run"),
    }


def status_of(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return int(response.status)
    except urllib.error.HTTPError as e:
        return e.code


@pytest.fixture(scope="module")
def deployed(postgres: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployed]:
    folder = tmp_path_factory.mktemp("deployed")
    store = create_database(postgres, f"deploy_{uuid.uuid4().hex[:12]}")
    host_port, database = store.removeprefix("postgresql+asyncpg://").split("@", 1)[1].split("/", 1)
    port = free_port()
    env = deployment_env(folder, SECRET_VALUES)
    # The cluster's PostgreSQL is the scratch one here (trust authentication: the password is not checked).
    env |= {
        "POSTGRES_HOST": host_port.rsplit(":", 1)[0],
        "POSTGRES_PORT": host_port.rsplit(":", 1)[1],
        "POSTGRES_USER": PG_USER,
        "POSTGRES_DB": database,
    }
    proc, url = start_and_read_line([ONETOOL, *served_args(port)], env=env, stderr=folder / "stderr")
    try:
        assert url.endswith(f":{port}/mcp"), url
        deadline = time.monotonic() + START_DEADLINE
        # /ready is 503 until the state store has been read.
        while status_of(f"http://127.0.0.1:{port}/ready") != 200:
            assert time.monotonic() < deadline, (folder / "stderr").read_text()
            time.sleep(0.1)
        yield Deployed(port, env)
    finally:
        stop(proc)


def probe_paths() -> dict[str, str]:
    """Every path something polls the gateway on, by who polls it."""
    container = k8s_container()
    probes = ("startupProbe", "livenessProbe", "readinessProbe")
    paths = {probe: container[probe]["httpGet"]["path"] for probe in probes}
    paths["Dockerfile HEALTHCHECK"] = urlsplit(healthcheck_url()).path
    (send,) = [words for words in haproxy_section("backend", "onetool") if words[:2] == ["http-check", "send"]]
    paths["haproxy http-check"] = send[send.index("uri") + 1]
    return paths


def test_every_probe_path_answers_200(deployed: Deployed) -> None:
    paths = probe_paths()
    assert set(paths.values()) == {"/health", "/ready"}
    for who, path in paths.items():
        assert status_of(deployed.base() + path) == 200, (who, path)
    # The gateway does not answer 200 to just any path: a wrong one in a manifest would show.
    assert status_of(deployed.base() + "/healthz") == 404


def run_healthcheck(port: int) -> subprocess.CompletedProcess[str]:
    """The image's HEALTHCHECK command against ``port`` (its python is this one)."""
    command = healthcheck()
    assert command[0] == "python", command
    code = command[-1]
    assert code.count("127.0.0.1:8765/") == 1, code
    argv = [sys.executable, *command[1:-1], code.replace("127.0.0.1:8765/", f"127.0.0.1:{port}/")]
    return subprocess.run(argv, capture_output=True, text=True, timeout=30)


def test_the_healthcheck_passes_against_the_gateway_and_fails_against_a_closed_port(deployed: Deployed) -> None:
    passed = run_healthcheck(deployed.port)
    assert passed.returncode == 0, passed.stderr
    failed = run_healthcheck(free_port())
    assert failed.returncode != 0


async def test_a_client_of_the_public_host_with_the_token_runs_code(deployed: Deployed) -> None:
    public_host = deployed.env["ONETOOL_PUBLIC_HOST"]
    url = deployed.base() + "/mcp"
    headers = {"Host": public_host, "Authorization": f"Bearer {SECRET_VALUES['token']}"}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=300)) as http,
        Client(streamable_http_client(url, http_client=http), read_timeout_seconds=60) as client,
    ):
        result = await client.call_tool("run", {"code": "6 * 7"})
        assert not result.is_error and text_of(result) == "42", text_of(result)

    ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    mcp = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    async with httpx2.AsyncClient(timeout=30) as http:
        # Any other DNS name is refused: DNS-rebinding protection is on (the config names the public host). An IP
        # address is no name a rebinding page can send: probes and scrapers send the pod's.
        other = await http.post(url, json=ping, headers={**mcp, **headers, "Host": f"rebind.example:{deployed.port}"})
        assert other.status_code == 421, other.text
        probe = await http.get(deployed.base() + "/ready", headers={"Host": f"10.1.2.3:{deployed.port}"})
        assert probe.status_code == 200, probe.text
        no_token = await http.post(url, json=ping, headers={**mcp, "Host": public_host})
        assert no_token.status_code == 401, no_token.text
        # The admin API answers the Secret's admin token (the same on every replica).
        admin = {"Authorization": f"Bearer {SECRET_VALUES['admin-token']}", "Host": public_host}
        assert (await http.get(deployed.base() + "/admin/servers", headers=admin)).status_code == 200


def test_the_secret_as_shipped_keeps_the_gateway_from_serving(tmp_path: Path) -> None:
    shipped = k8s_object("Secret")["stringData"]
    assert set(shipped.values()) == {""}, "the shipped Secret holds values: anyone with the repository has them"
    env = deployment_env(tmp_path, shipped)
    proc = subprocess.run(
        [ONETOOL, *served_args(free_port())], env=env, capture_output=True, text=True, timeout=START_DEADLINE
    )
    assert proc.returncode == 1, proc.stderr
    assert "refusing to serve on 0.0.0.0 without a token" in proc.stderr
