"""/metrics scraped from a running gateway after known traffic, and the Grafana dashboard that reads it."""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import FIXTURES, PYTHON, TIME_SERVER
from tests.gateways import ServedGateway, origin, start_http_gateway, stop

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).parents[2]
DASHBOARD = ROOT / "deploy" / "grafana" / "onetool.json"
TOKEN = "metrics-token"
Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServedGateway]:
    marker = f"metrics-{uuid.uuid4().hex}"
    config = {
        "servers": {
            "time": {"command": TIME_SERVER, "args": ["--local-timezone", "UTC"]},
            "fx": {"command": PYTHON, "args": [str(FIXTURES / "fault_server.py"), "ok"]},
            "off": {"command": "node", "enabled": False},
        },
        "sandbox": {"timeout": 2},
        "http": {"token": TOKEN},
    }
    gateway = start_http_gateway(tmp_path_factory.mktemp("metrics"), config, marker)
    try:
        yield gateway
    finally:
        assert stop(gateway.proc) == 0


def scrape(url: str, token: str | None = TOKEN) -> tuple[int, str]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    request = urllib.request.Request(origin(url) + "/metrics", headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def samples(text: str) -> Samples:
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def value(found: Samples, name: str, **labels: str) -> float:
    return found.get((name, frozenset(labels.items())), 0.0)


async def test_a_scrape_counts_the_runs_calls_kills_and_state_of_known_traffic(served: ServedGateway) -> None:
    assert scrape(served.url, None)[0] == 401
    assert scrape(served.url, "wrong")[0] == 401
    snippets = {
        "time.get_current_time(timezone='UTC')": False,
        "[time.get_current_time(timezone='UTC') for _ in range(2)]": False,
        "1/0": True,
        "fx.fail(message='no')": True,  # the upstream's error, uncaught: origin "tool"
        "while True: pass": True,  # past sandbox.timeout: the host kills the worker
        "time.get_curent_time(timezone='UTC')": True,  # the caller's typo, found before anything ran
    }
    async with (
        httpx2.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"}) as http,
        Client(streamable_http_client(served.url, http_client=http), read_timeout_seconds=60) as client,
    ):
        for code, failed in snippets.items():
            assert (await client.call_tool("run", {"code": code})).is_error is failed, code

    status, text = scrape(served.url)
    assert status == 200
    found = samples(text)
    runs = {k[1]: v for k, v in found.items() if k[0] == "onetool_runs_total"}
    assert runs == {
        frozenset({("face", "run"), ("outcome", "ok")}): 2,
        frozenset({("face", "run"), ("outcome", "code")}): 1,
        frozenset({("face", "run"), ("outcome", "tool")}): 1,
        frozenset({("face", "run"), ("outcome", "host")}): 1,
        frozenset({("face", "run"), ("outcome", "precheck")}): 1,
    }
    assert value(found, "onetool_run_duration_seconds_count", face="run") == 6
    assert value(found, "onetool_sandbox_kills_total", reason="TimeoutError") == 1
    calls = value(found, "onetool_upstream_call_duration_seconds_count", server="time", tool="get_current_time")
    assert calls == 3
    # fx.fail answers with a JSON-RPC error (UpstreamError); an isError result would be a ToolError.
    assert value(found, "onetool_upstream_call_errors_total", server="fx", tool="fail", error="UpstreamError") == 1
    errors = [k for k in found if k[0] == "onetool_upstream_call_errors_total" and ("server", "time") in k[1]]
    assert errors == []
    assert value(found, "onetool_upstream_connected", server="time") == 1
    assert value(found, "onetool_upstream_connected", server="off") == 0
    assert value(found, "onetool_upstream_state", server="off", state="disabled") == 1
    assert value(found, "onetool_upstream_state", server="time", state="connected") == 1
    assert value(found, "onetool_upstream_tools", server="time") == 2
    assert value(found, "onetool_run_queue_depth") == 0
    assert value(found, "onetool_sandbox_max_workers") >= value(found, "onetool_sandbox_max_concurrent_runs") >= 1
    # Each server's first connection changed what the faces list.
    assert value(found, "onetool_list_changed_total", list="tools/list_changed") >= 1


def test_every_metric_the_dashboard_queries_is_in_a_scrape(served: ServedGateway) -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    queried = {
        name
        for panel in dashboard["panels"]
        for target in panel["targets"]
        for name in re.findall(r"\bonetool_[a-z_]+", target["expr"])
    }
    queried |= set(re.findall(r"\bonetool_[a-z_]+", json.dumps(dashboard["templating"])))
    scraped = {name for name, _labels in samples(scrape(served.url)[1])}
    assert len(queried) >= 12
    assert queried - scraped == set()
