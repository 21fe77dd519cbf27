"""HTTP upstreams: streamable HTTP, SSE (configured and as fallback), headers, the plain-http rule, HTTP errors."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import anyio
import pytest
from anyio.abc import SocketStream
from pydantic import ValidationError

from onetool.config import ServerConfig
from onetool.errors import UpstreamError, UpstreamUnavailable
from onetool.hosts import is_loopback, plain_http_host
from onetool.text import public_url
from tests.conftest import free_port
from tests.upstream.conftest import FaultHttpServer, open_pool, wait_for_status


@pytest.mark.parametrize(
    ("url", "host"),
    [
        ("http://example.com/mcp", "example.com"),
        ("HTTP://API.example.com:8080/mcp?x=1", "api.example.com"),
        ("http://10.0.0.5/mcp", "10.0.0.5"),
        ("http://0.0.0.0:9/mcp", "0.0.0.0"),
        ("http://localhost.evil.com/mcp", "localhost.evil.com"),
        ("http://127.0.0.1.nip.io/mcp", "127.0.0.1.nip.io"),
        ("http://[fd00::1]:8080/mcp", "fd00::1"),
        ("https://example.com/mcp", None),
        ("http://127.0.0.1:3000/mcp", None),
        ("http://127.8.9.10/mcp", None),
        ("http://localhost:3000/mcp", None),
        ("http://LOCALHOST/mcp", None),
        ("http://[::1]:3000/mcp", None),
    ],
)
def test_plain_http_to_another_host_needs_allow_http(url: str, host: str | None) -> None:
    """No silent upgrade to https and no silent plain text: the config refuses the URL, naming the key that allows
    it; with ``allow_http`` the URL is used exactly as written."""
    assert plain_http_host(url) == host
    if host is None:
        assert ServerConfig(url=url).url == url
        return
    with pytest.raises(ValidationError) as refused:
        ServerConfig(url=url)
    message = str(refused.value)
    assert f"plain http:// to {host}" in message and "allow_http: true" in message and "https://" in message
    assert ServerConfig(url=url, allow_http=True).url == url


def test_loopback_rule_and_loggable_url() -> None:
    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("[::1]") and is_loopback("localhost")
    assert not is_loopback("10.1.2.3") and not is_loopback("example.com")
    assert public_url("https://user:pw@example.com:8443/mcp?token=abc#x") == "https://example.com:8443/mcp"


async def test_allowed_plain_http_is_used_as_written_and_warned_about_without_secrets(
    log_records: list[dict[str, Any]],
) -> None:
    port = free_port()  # nothing listens; 0.0.0.0 is not loopback
    servers = {
        "remote": {
            "url": f"http://user:userinfo-secret@0.0.0.0:{port}/mcp?key=query-secret",
            "headers": {"Authorization": "Bearer header-secret-99"},
            "allow_http": True,
            "connect_timeout": 3,
        },
        "local": {"url": f"http://127.0.0.1:{port}/mcp", "connect_timeout": 3},
    }
    async with open_pool(servers) as pool:
        remote = pool.server_status("remote")
        assert remote.status == "failed" and remote.error == f"cannot reach http://0.0.0.0:{port}/mcp (ConnectError)"
    warnings = [r for r in log_records if r["level"] == "WARNING" and "unencrypted" in r["message"]]
    assert [(r["extra"]["server"], r["extra"]["host"]) for r in warnings] == [("remote", "0.0.0.0")]
    assert "allow_http: true" in warnings[0]["message"]
    for r in log_records:
        text = r["message"] + repr(r["extra"])
        assert "header-secret-99" not in text and "query-secret" not in text and "userinfo-secret" not in text


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_streamable_http_everything(mode: str, everything_http: str) -> None:
    async with open_pool({"ev": {"url": everything_http}}, mode=mode) as pool:
        st = pool.server_status("ev")
        assert (st.status, st.type, st.protocol_version) == ("connected", "http", "2025-11-25")
        assert "5" in (await pool.call("ev", "get-sum", {"a": 2, "b": 3})).content[0].text


async def test_sse_everything_configured_and_as_fallback(everything_sse: str) -> None:
    servers = {"sse": {"url": everything_sse, "type": "sse"}, "fallback": {"url": everything_sse}}
    async with open_pool(servers) as pool:
        for name in servers:
            assert pool.server_status(name).status == "connected", pool.server_status(name)
            assert (await pool.call(name, "echo", {"message": name})).content[0].text == f"Echo: {name}"


@pytest.fixture
def http_server() -> Iterator[FaultHttpServer]:
    with FaultHttpServer() as server:
        yield server


@pytest.fixture(scope="module")
def fault_http() -> Iterator[str]:
    with FaultHttpServer() as server:
        yield server.url


@pytest.mark.parametrize(("mode", "era"), [("auto", "2026-07-28"), ("legacy", "2025-11-25")])
async def test_custom_headers_reach_the_server_both_eras(mode: str, era: str, fault_http: str) -> None:
    servers = {"fx": {"url": fault_http, "headers": {"X-Onetool-Test": "hdr-value"}}}
    async with open_pool(servers, mode=mode) as pool:
        assert pool.server_status("fx").protocol_version == era
        for _ in range(2):  # every request, not only the first
            got = await pool.call("fx", "header", {"name": "x-onetool-test"})
            assert got.structured_content == {"result": "hdr-value"}


async def _answer_with(status: str, port_ready: anyio.Event, ports: list[int]) -> None:
    async def handle(stream: SocketStream) -> None:
        async with stream:
            await stream.receive()
            body = b'{"error": "nope"}'
            head = f"HTTP/1.1 {status}\r\nContent-Type: text/plain\r\nContent-Length: {len(body)}\r\n"
            await stream.send(head.encode() + b"Connection: close\r\n\r\n" + body)

    async with await anyio.create_tcp_listener(local_host="127.0.0.1") as listener:
        ports.append(listener.extra(anyio.abc.SocketAttribute.local_port))
        port_ready.set()
        await listener.serve(handle)


@pytest.fixture
async def unauthorized_url() -> AsyncIterator[str]:
    ready, ports = anyio.Event(), []
    async with anyio.create_task_group() as tg:
        tg.start_soon(_answer_with, "401 Unauthorized", ready, ports)
        await ready.wait()
        yield f"http://127.0.0.1:{ports[0]}/mcp"
        tg.cancel_scope.cancel()


async def test_http_401_fails_with_the_status(unauthorized_url: str) -> None:
    servers = {"locked": {"url": unauthorized_url, "headers": {"Authorization": "Bearer wrong"}}}
    async with open_pool(servers) as pool:
        st = pool.server_status("locked")
        assert st.status == "failed" and st.error == "HTTP 401 Unauthorized"
        with pytest.raises(UpstreamUnavailable) as unavailable:
            await pool.call("locked", "x", {})
        # Retrying will not help: the message says what to fix instead.
        assert str(unavailable.value) == (
            "server 'locked' is unavailable: HTTP 401 Unauthorized; "
            "the server refused the credentials, or wants some: check servers.locked.headers (Authorization: Bearer "
            "...), or, for an OAuth server, add an oauth: block to servers.locked and run `onetool auth locked`"
        )


async def test_unreachable_http_server_is_named_without_credentials() -> None:
    port = free_port()  # nothing listens
    url = f"http://user:pw-secret@127.0.0.1:{port}/mcp?token=query-secret"
    async with open_pool({"down": {"url": url, "connect_timeout": 3}}) as pool:
        st = pool.server_status("down")
        assert st.status == "failed"
        assert st.error == f"cannot reach http://127.0.0.1:{port}/mcp (ConnectError)"
        assert "OneTool keeps reconnecting" in str(st.unavailable())


async def test_http_server_death_disconnects_and_reconnects(http_server: FaultHttpServer) -> None:
    async with open_pool({"fx": {"url": http_server.url, "connect_timeout": 5}}) as pool:
        assert pool.server_status("fx").status == "connected"
        http_server.kill()
        with pytest.raises(UpstreamUnavailable):
            await pool.call("fx", "crash", {})
        assert pool.server_status("fx").status == "disconnected"
        http_server.start()
        await wait_for_status(pool, "fx", "connected", timeout=30)
        assert (await pool.call("fx", "echo", {"message": "back"})).content[0].text == "echo: back"


async def test_dead_http_server_turns_disconnected_without_a_call(http_server: FaultHttpServer) -> None:
    async with open_pool({"fx": {"url": http_server.url, "connect_timeout": 2}}, probe_interval=0.2) as pool:
        assert pool.server_status("fx").status == "connected"
        http_server.kill()
        await wait_for_status(pool, "fx", "disconnected", timeout=10)
        assert pool.server_status("fx").error  # why it is down: the probe, then each reconnect attempt
        http_server.start()
        await wait_for_status(pool, "fx", "connected", timeout=30)


async def test_a_reply_up_to_the_server_cap_passes_and_a_longer_one_fails_both_eras(fault_http: str) -> None:
    """`max_message_mb` caps one message from an HTTP server as from a stdio one. A 2025-era server answers in
    an SSE event, which the SDK's client caps at 1 MB unless told otherwise; a 2026-era one in a JSON body,
    which it reads whole: past the cap that one call fails and the session goes on."""
    servers = {"fx": {"url": fault_http, "max_message_mb": 2}}
    for mode in ("legacy", "auto"):
        async with open_pool(servers, mode=mode) as pool:
            message = "x" * 700_000  # the reply carries it twice: 1.4 MB
            assert (await pool.call("fx", "echo", {"message": message})).structured_content == {
                "result": f"echo: {message}"
            }, mode
            with pytest.raises(UpstreamError) as info:
                await pool.call("fx", "echo", {"message": "x" * 1_200_000})
            if mode == "auto":
                assert "sent a message longer than 2 MB (servers.fx.max_message_mb)" in str(info.value)
                assert pool.server_status("fx").status == "connected"
            else:
                assert "exceeded the 2097152 byte limit" in str(info.value)
            await wait_for_status(pool, "fx", "connected")
            assert (await pool.call("fx", "echo", {"message": "y"})).structured_content == {"result": "echo: y"}
