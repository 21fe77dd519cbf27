"""The bridge answers each client with URLs on the host that client reached it at: bound on 0.0.0.0, a bind
address is no address, and clients on different networks know the bridge by different names."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any
from urllib.parse import urlsplit

import httpx2
import pytest

from tests.bridge.conftest import TOKEN, BridgeProcess, Netns, mcp_client, time_server

HEADERS = {"Authorization": f"Bearer {TOKEN}"}


def api(base: str, method: str, path: str, **kw: Any) -> httpx2.Response:
    return httpx2.request(method, f"{base}{path}", headers=HEADERS, timeout=60, **kw)


async def tool_names(url: str) -> set[str]:
    async with mcp_client(url) as client:
        return {tool.name for tool in (await client.list_tools()).tools}


@pytest.mark.anyio
async def test_each_client_gets_urls_on_the_address_it_used(bridge_factory: Any) -> None:
    """Bound on 0.0.0.0, reached at 127.0.0.1 and at 127.0.0.2 (both this machine's): every answer names the
    address its own client used, and that URL works."""
    bridge: BridgeProcess = bridge_factory("--host", "0.0.0.0", "--base-port", "0")
    port = urlsplit(bridge.url).port
    one, two = f"http://127.0.0.1:{port}", f"http://127.0.0.2:{port}"
    created = api(one, "POST", "/convert", json=time_server())
    assert created.status_code == 201, created.text
    served = created.json()["port"]
    assert created.json()["url"] == f"http://127.0.0.1:{served}/mcp"

    assert api(two, "GET", "/convert/time").json()["url"] == f"http://127.0.0.2:{served}/mcp"
    assert [s["url"] for s in api(two, "GET", "/convert").json()["servers"]] == [f"http://127.0.0.2:{served}/mcp"]
    again = api(two, "POST", "/convert", json=time_server())
    assert again.status_code == 409 and again.json()["url"] == f"http://127.0.0.2:{served}/mcp"
    assert api(one, "GET", "/convert/time").json()["url"] == f"http://127.0.0.1:{served}/mcp"
    assert await tool_names(f"http://127.0.0.2:{served}/mcp") == {"get_current_time", "convert_time"}


@pytest.mark.anyio
async def test_a_bridge_in_a_network_namespace_answers_with_the_address_it_was_reached_at(
    netns: Netns, bridge_factory: Any
) -> None:
    """The bridge on 0.0.0.0 inside a namespace of its own: this side reaches it at the namespace's veth address
    and gets URLs there (that work from here); a client inside the namespace gets 127.0.0.1 URLs."""
    bridge: BridgeProcess = bridge_factory("--host", "0.0.0.0", "--base-port", "0", prefix=netns.exec)
    port = urlsplit(bridge.url).port
    outside = f"http://{netns.address}:{port}"
    created = api(outside, "POST", "/convert", json=time_server())
    assert created.status_code == 201, created.text
    served = created.json()["port"]
    url = f"http://{netns.address}:{served}/mcp"
    assert created.json()["url"] == url
    assert api(outside, "GET", "/convert/time").json()["url"] == url
    assert await tool_names(url) == {"get_current_time", "convert_time"}

    inside = subprocess.run(
        [
            *netns.exec,
            sys.executable,
            "-c",
            "import json, sys, httpx2; r = httpx2.get(sys.argv[1], headers=json.loads(sys.argv[2]), timeout=30); "
            "print(r.status_code, r.json()['url'])",
            f"http://127.0.0.1:{port}/convert/time",
            json.dumps(HEADERS),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert inside.returncode == 0, inside.stderr
    assert inside.stdout.split() == ["200", f"http://127.0.0.1:{served}/mcp"]
    assert os.readlink(f"/proc/{bridge.pid}/ns/net") != os.readlink("/proc/self/ns/net"), "not in the namespace"
    assert len(bridge.children()) == 1
