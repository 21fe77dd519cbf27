"""Streamable HTTP: both eras, list_changed pushes, bearer auth, DNS-rebinding protection, startup errors."""

from __future__ import annotations

import ipaddress
import socket
import urllib.request
from typing import Any

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.types import TextContent

from onetool.errors import ServeError
from onetool.hosts import is_loopback
from onetool.serve import listen, serve_http
from tests.serve.conftest import run_face_routes, running_http
from tests.serve.fake_gateway import INITIALIZE, FakeGateway

LIST_CHANGED = "notifications/tools/list_changed"


@pytest.mark.parametrize(("mode", "version"), [("auto", "2026-07-28"), ("legacy", "2025-11-25")])
async def test_both_eras_list_and_call(mode: str, version: str) -> None:
    async with running_http(FakeGateway()) as url, Client(url, mode=mode, read_timeout_seconds=10) as client:
        assert client.protocol_version == version
        tools = (await client.list_tools()).tools
        assert [(t.name, t.description) for t in tools] == [("run", "Run Python code. Catalogue v1.")]
        result = await client.call_tool("run", {"code": "print(1)"})
        assert result.content == [TextContent(type="text", text="echo: print(1)")]
        assert (result.structured_content, result.is_error) == ({"result": "print(1)"}, False)


async def test_port_zero_reports_a_working_url_and_health() -> None:
    async with running_http(FakeGateway()) as url:
        host_port = url.removeprefix("http://").removesuffix("/mcp")
        assert url.startswith("http://127.0.0.1:") and not host_port.endswith(":0")
        async with httpx2.AsyncClient() as http:
            response = await http.get(f"http://{host_port}/health")
        assert (response.status_code, response.json()) == (
            200,
            {"status": "ok", "servers": {}, "store": "ok", "draining": False},
        )


async def test_list_changed_reaches_a_legacy_client() -> None:
    gateway = FakeGateway()
    changed = anyio.Event()

    async def on_message(message: object) -> None:
        if getattr(message, "method", None) == LIST_CHANGED:
            changed.set()

    async with (
        running_http(gateway) as url,
        Client(url, mode="legacy", message_handler=on_message, read_timeout_seconds=10) as client,
    ):
        await client.list_tools()
        # The standalone GET stream opens in the background after the handshake: retry until a push lands.
        with anyio.fail_after(10):
            while not changed.is_set():
                gateway.change()
                with anyio.move_on_after(0.5):
                    await changed.wait()
        assert (await client.list_tools()).tools[0].description == gateway.describe_run()
        assert gateway.version >= 2


async def test_list_changed_reaches_a_2026_client() -> None:
    gateway = FakeGateway()
    async with running_http(gateway) as url, Client(url, read_timeout_seconds=10) as client:
        assert client.protocol_version == "2026-07-28"
        async with client.listen(tools_list_changed=True) as subscription:
            gateway.change()
            with anyio.fail_after(10):
                async for _event in subscription:
                    break
        assert (await client.list_tools()).tools[0].description == "Run Python code. Catalogue v2."


async def test_closed_legacy_sessions_are_forgotten(log_records: list[dict]) -> None:
    gateway = FakeGateway()
    async with running_http(gateway) as url:
        async with Client(url, mode="legacy", read_timeout_seconds=10) as client:
            await client.list_tools()
            gateway.change()
            await anyio.sleep(0.2)
        await anyio.sleep(0.2)
        gateway.change()
        await anyio.sleep(0.2)
    pushes = [r["extra"]["handshakeSessions"] for r in log_records if r["message"] == "tools/list_changed"]
    assert pushes == [1, 0]


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_bearer_token_is_required_when_set(mode: str) -> None:
    async with running_http(FakeGateway(), token="s3cret") as url:
        async with httpx2.AsyncClient() as http:
            body = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
            for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": "Basic s3cret"}):
                response = await http.post(url, json=body, headers=headers)
                assert response.status_code == 401
                assert response.json()["error"] == "unauthorized"
            # /health stays open for liveness probes.
            assert (await http.get(url.replace("/mcp", "/health"))).status_code == 200
        async with (
            httpx2.AsyncClient(headers={"Authorization": "Bearer s3cret"}) as http,
            Client(streamable_http_client(url, http_client=http), mode=mode, read_timeout_seconds=10) as client,
        ):
            assert not (await client.call_tool("run", {"code": "1"})).is_error


ACCEPT = {"Accept": "application/json, text/event-stream"}


@pytest.mark.parametrize("host", ["evil.example", "evil.example:80", "127.0.0.1.nip.io", "localhost.evil.example"])
async def test_foreign_host_header_is_rejected(host: str) -> None:
    async with running_http(FakeGateway()) as url, httpx2.AsyncClient() as http:
        for era_header in ({}, {"MCP-Protocol-Version": "2026-07-28"}):
            response = await http.post(url, json=INITIALIZE, headers={"Host": host, **ACCEPT, **era_header})
            assert response.status_code == 421
        port = url.split(":")[2].split("/")[0]
        response = await http.post(url, json=INITIALIZE, headers={"Host": f"localhost:{port}", **ACCEPT})
        assert response.status_code == 200


@pytest.mark.parametrize("host", ["localhost", "127.0.0.1:1", "10.1.2.3:8765", "[::1]", "[fd00::5]:8765"])
async def test_a_host_no_rebinding_page_can_send_passes(host: str) -> None:
    """An IP address or the literal localhost is no DNS name an attacker controls: what a Kubernetes probe (the pod's
    address), a Prometheus scrape or a container's healthcheck sends passes, on every route."""
    async with running_http(FakeGateway()) as url, httpx2.AsyncClient() as http:
        assert (await http.post(url, json=INITIALIZE, headers={"Host": host, **ACCEPT})).status_code == 200
        assert (await http.get(url.replace("/mcp", "/health"), headers={"Host": host})).status_code == 200


async def test_foreign_origin_is_rejected() -> None:
    async with running_http(FakeGateway()) as url, httpx2.AsyncClient() as http:
        response = await http.post(url, json=INITIALIZE, headers={"Origin": "http://evil.example", **ACCEPT})
        assert response.status_code == 403
        # A page on another port of this machine is another origin, same-site as it is.
        port = url.split(":")[2].split("/")[0]
        other_port = {"Origin": f"http://127.0.0.1:{int(port) + 1}", **ACCEPT}
        assert (await http.post(url, json=INITIALIZE, headers=other_port)).status_code == 403
        own = {"Origin": f"http://127.0.0.1:{port}", **ACCEPT}
        assert (await http.post(url, json=INITIALIZE, headers=own)).status_code == 200


async def test_the_hosts_and_origins_the_config_allows_pass_and_no_other() -> None:
    """A reverse proxy on another port sends its own Host and Origin (http.allowed_hosts, http.allowed_origins);
    DNS-rebinding protection stays on for every other name."""
    allowed = {"allowed_hosts": ("mcp.example:8443",), "allowed_origins": ("https://mcp.example:8443",)}
    async with running_http(FakeGateway(), **allowed) as url, httpx2.AsyncClient() as http:
        proxied = {"Host": "mcp.example:8443", "Origin": "https://mcp.example:8443", **ACCEPT}
        assert (await http.post(url, json=INITIALIZE, headers=proxied)).status_code == 200
        port = url.split(":")[2].split("/")[0]
        assert (
            await http.post(url, json=INITIALIZE, headers={"Host": f"localhost:{port}", **ACCEPT})
        ).status_code == 200
        for host in ("evil.example:8443", "mcp.example:80"):
            assert (await http.post(url, json=INITIALIZE, headers={**proxied, "Host": host})).status_code == 421
        foreign = {**proxied, "Origin": "https://evil.example"}
        assert (await http.post(url, json=INITIALIZE, headers=foreign)).status_code == 403


@pytest.mark.parametrize("stateless", [False, True])
async def test_stateless_mode_gives_no_session_and_still_serves_legacy_clients(stateless: bool) -> None:
    async with running_http(FakeGateway(), stateless=stateless) as url, httpx2.AsyncClient() as http:
        response = await http.post(url, json=INITIALIZE, headers=ACCEPT)
        assert response.status_code == 200
        assert ("mcp-session-id" in response.headers) is not stateless
        async with Client(url, mode="legacy", read_timeout_seconds=10) as client:
            assert (await client.call_tool("run", {"code": "1"})).structured_content == {"result": "1"}


def test_non_loopback_without_token_is_refused() -> None:
    with pytest.raises(ServeError, match=r"refusing to serve on 0\.0\.0\.0 without a token"):
        listen("0.0.0.0", 0, None)


@pytest.fixture
def resolver_ignoring_rfc6761(monkeypatch: pytest.MonkeyPatch) -> None:
    """A resolver that answers evil.localhost with the wildcard address, as a hostile DNS server may.

    It stands in for DNS only (this machine cannot be told to resolve such a name); binding stays real.
    """
    real = socket.getaddrinfo

    def getaddrinfo(host: str, *args: Any, **kwargs: Any) -> Any:
        return real("0.0.0.0" if host == "evil.localhost" else host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)


@pytest.mark.usefixtures("resolver_ignoring_rfc6761")
def test_a_name_that_only_looks_local_needs_a_token() -> None:
    with pytest.raises(ServeError, match=r"refusing to serve on evil\.localhost \(0\.0\.0\.0\) without a token"):
        listen("evil.localhost", 0, None)
    # The plain-http upstream rule counts literal names only, so it does not trust such a name either.
    assert not is_loopback("evil.localhost") and is_loopback("localhost")


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost", "127.1", "::1"])
def test_loopback_is_decided_by_the_resolved_address(host: str) -> None:
    with listen(host, 0, None) as listener:
        assert listener.loopback and listener.token is None
        assert ipaddress.ip_address(listener.sock.getsockname()[0]).is_loopback


def test_port_in_use_is_a_clear_error() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(ServeError, match=f"port {port} is already in use on 127.0.0.1"):
            listen("127.0.0.1", port, None)


async def test_cancel_with_open_streams_shuts_down_cleanly(log_records: list[dict]) -> None:
    """Cancelling serve_http while a legacy GET stream and a 2026 listen stream are open ends promptly.

    uvicorn logs an ERROR when it has to cancel connections that outlive its graceful timeout, so no ERROR
    record means the streams were closed by us rather than torn down.
    """
    listener = listen("127.0.0.1", 0, None)
    url = listener.url("/mcp")
    served = anyio.Event()
    legacy_up, listening, listen_ended = anyio.Event(), anyio.Event(), anyio.Event()

    async def legacy() -> None:
        async with Client(url, mode="legacy", read_timeout_seconds=10) as client:
            await client.list_tools()
            legacy_up.set()
            await anyio.sleep_forever()

    async def modern() -> None:
        async with Client(url, read_timeout_seconds=10) as client:
            async with client.listen(tools_list_changed=True) as subscription:
                listening.set()
                async for _ in subscription:
                    pass
            listen_ended.set()

    with listener, anyio.fail_after(10):
        async with anyio.create_task_group() as clients:
            with anyio.CancelScope() as server_scope:
                async with anyio.create_task_group() as server:
                    routes = run_face_routes(FakeGateway(), listener)
                    server.start_soon(lambda: serve_http(listener, routes, on_ready=served.set))
                    await served.wait()
                    clients.start_soon(legacy)
                    clients.start_soon(modern)
                    await legacy_up.wait()
                    await listening.wait()
                    server_scope.cancel()
            # The listen stream was closed gracefully (its loop ended) rather than dropped.
            await listen_ended.wait()
            clients.cancel_scope.cancel()
    assert [r for r in log_records if r["level"] in ("ERROR", "CRITICAL")] == []


async def test_each_http_request_is_one_debug_record_without_its_query(log_records: list[dict[str, Any]]) -> None:
    async with running_http(FakeGateway()) as url:
        origin = url.removesuffix("/mcp")
        status = await anyio.to_thread.run_sync(_status_of, f"{origin}/health?code=secret-code&state=s")
    assert status == 200
    records = [r for r in log_records if r["message"] == "http.request"]
    assert [(r["level"], r["extra"]["method"], r["extra"]["path"], r["extra"]["status"]) for r in records] == [
        ("DEBUG", "GET", "/health", 200)
    ]
    assert "secret-code" not in repr(log_records)


def _status_of(url: str) -> int:
    with urllib.request.urlopen(url, timeout=10) as response:
        return int(response.status)
