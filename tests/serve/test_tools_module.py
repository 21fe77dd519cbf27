"""GET /runtime/tools.py through a real `onetool serve --http`, and `onetool stubs`, on the live reference servers."""

from __future__ import annotations

import os
import subprocess
import time
import uuid
from pathlib import Path

import httpx2
import pytest

from onetool.registry import Registry
from onetool.serve import _tools_module as tools_module_serving
from tests.conftest import FIXTURES, PYTHON
from tests.gateways import (
    ONETOOL,
    ServedGateway,
    gateway_config,
    start_http_gateway,
    stop,
    text_of,
    write_config,
)
from tests.stubs.test_stubs import classes_of, type_check

pytestmark = pytest.mark.anyio


def module_url(gateway: ServedGateway) -> str:
    return gateway.url.removesuffix("/mcp") + "/runtime/tools.py"


def test_the_served_module_types_the_live_catalogue(gateway: ServedGateway, tmp_path: Path) -> None:
    response = httpx2.get(module_url(gateway))
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/x-python")
    module = response.text
    packs = classes_of(module)
    # Every pack the run face sees; a failed or disabled server's pack is there without tools.
    assert sorted(packs) == ["Brave", "BrokenHelper", "BrokenServer", "Fx", "Off", "Proxy", "Time"]
    assert packs["BrokenServer"] == packs["Off"] == []
    assert {"echo", "web_search", "get_sum"} <= set(packs["Brave"])  # local tools over server-everything's
    snippet = """\
now: str = time.get_current_time(timezone="UTC")["datetime"]
total = brave.get_sum(a=1, b=2)
time.get_current_time(zone="UTC")
"""
    errors = type_check(tmp_path, module, snippet)
    assert len(errors) == 1 and "snippet.py:5:" in errors[0] and '"zone"' in errors[0], errors


def test_filters_over_http(gateway: ServedGateway, tmp_path: Path) -> None:
    def packs(query: str) -> dict[str, list[str]]:
        response = httpx2.get(module_url(gateway), params={"filter": query})
        assert response.status_code == 200
        return classes_of(response.text)

    assert packs("time") == {"Time": ["get_current_time", "convert_time"]}
    assert packs("time,brave__get-sum,fx__nope") == {"Brave": ["get_sum"], "Time": ["get_current_time", "convert_time"]}
    assert packs("nosuch") == {}
    empty = httpx2.get(module_url(gateway), params={"filter": "nosuch"}).text
    assert type_check(tmp_path, empty) == []
    too_long = httpx2.get(module_url(gateway), params={"filter": "x" * 20_000})
    assert too_long.status_code == 400 and "at most" in too_long.text


def test_a_foreign_host_header_is_refused_on_loopback(gateway: ServedGateway) -> None:
    response = httpx2.get(module_url(gateway), headers={"Host": "evil.example:80"})
    assert response.status_code != 200 and "class " not in response.text


async def test_the_module_follows_an_upstream_catalogue_change(tmp_path: Path) -> None:
    config = {"servers": {"fx": {"command": PYTHON, "args": [str(FIXTURES / "fault_server.py"), "ok"]}}}
    served = start_http_gateway(tmp_path, config, f"tm-{uuid.uuid4().hex}")
    try:
        url = module_url(served)
        before = httpx2.get(url).text
        assert "def echo(" in before and "def brand_new(" not in before
        assert httpx2.get(url).text == before
        assert text_of(await served.run("fx.add_tool(name='brand_new')")) == "added brand_new"
        deadline = time.monotonic() + 10
        while "def brand_new(self) -> str:" not in (after := httpx2.get(url).text) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert "def brand_new(self) -> str:" in after
    finally:
        assert stop(served.proc) == 0


def test_with_a_token_the_module_needs_the_bearer_like_mcp(tmp_path: Path) -> None:
    served = start_http_gateway(tmp_path, {}, f"tk-{uuid.uuid4().hex}", env={"ONETOOL_TOKEN": "s3cret-token"})
    try:
        url = module_url(served)
        assert httpx2.get(url).status_code == 401
        assert httpx2.get(url, headers={"Authorization": "Bearer wrong"}).status_code == 401
        allowed = httpx2.get(url, headers={"Authorization": "Bearer s3cret-token"})
        assert allowed.status_code == 200 and "\nproxy: Proxy = Proxy()\n" in allowed.text
        assert httpx2.get(served.url.removesuffix("/mcp") + "/health").status_code == 200
    finally:
        assert stop(served.proc) == 0


def test_onetool_stubs_writes_the_same_module_attached_or_standalone(tmp_path: Path) -> None:
    marker = f"st-{uuid.uuid4().hex}"
    config = gateway_config(marker)
    config["servers"] = {"time": config["servers"]["time"], "fx": config["servers"]["fx"]}
    path = str(write_config(tmp_path, config))
    out = tmp_path / "tools.py"

    def stubs(*extra: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        command = [ONETOOL, "stubs", "--config", path, *extra]
        return subprocess.run(command, capture_output=True, text=True, timeout=60, env={**os.environ, **(env or {})})

    served = start_http_gateway(tmp_path, config, marker)
    try:
        # Through the gateway serving the config (its discovery file), as `tools` and `run` go.
        done = stubs("--filter", "time,fx__echo", "-o", str(out))
        assert done.returncode == 0, done.stderr
        assert classes_of(out.read_text()) == {"Fx": ["echo"], "Time": ["get_current_time", "convert_time"]}
        assert type_check(tmp_path, out.read_text(), 'fx.echo(message="hi")\n') == []
        assert served.log.read_text().count("path=/admin/stubs") == 1
        refused = stubs("-o", str(tmp_path / "no" / "such" / "dir.py"))
        assert refused.returncode == 2 and "cannot write" in refused.stderr
    finally:
        assert stop(served.proc) == 0
    # With no gateway, the servers are connected here: the same module.
    printed = stubs("--filter", "time,fx__echo", env={"ONETOOL_RUNTIME_DIR": str(tmp_path / "none")})
    assert printed.returncode == 0 and printed.stdout == out.read_text(), printed.stderr


async def test_the_module_is_rendered_once_per_catalogue_and_filter(monkeypatch: pytest.MonkeyPatch) -> None:
    renders: list[tuple[Registry, object]] = []

    def counted(registry: Registry, names: object) -> str:
        renders.append((registry, names))
        return f"module {len(renders)}"

    monkeypatch.setattr(tools_module_serving, "tools_module", counted)
    current = Registry({})
    cache = tools_module_serving.ToolsModuleCache(lambda: current)
    assert [await cache.text(None) for _ in range(3)] == ["module 1"] * 3
    assert await cache.text(["time"]) == "module 2"
    assert await cache.text(["time"]) == "module 2"
    current = Registry({})  # a new catalogue: a tool list changed, a server came or went
    assert await cache.text(None) == "module 3"
    assert await cache.text(None) == "module 3"
    assert [names for _, names in renders] == [None, ["time"], None]
