"""The HTTP front's request deadlines and connection cap, against raw loopback sockets and real MCP clients."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
import httpx2
import pytest
from anyio.abc import SocketStream
from mcp import Client

from onetool.serve import HttpLimits
from tests.serve.conftest import running_http
from tests.serve.fake_gateway import FakeGateway

SHORT = HttpLimits(header_timeout=0.5, body_timeout=0.5)
PARTIAL_HEADERS = b"GET /health HTTP/1.1\r\nHost: 127.0.0.1"
HEALTH = b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
# A body that is announced but never sent in full.
PARTIAL_BODY = (
    b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"
)


@asynccontextmanager
async def connected(url: str, payload: bytes = b"") -> AsyncIterator[SocketStream]:
    port = int(url.split(":")[2].split("/")[0])
    async with await anyio.connect_tcp("127.0.0.1", port) as stream:
        if payload:
            await stream.send(payload)
        yield stream


async def seconds_until_closed(stream: SocketStream, bound: float) -> float:
    """How long the server took to close ``stream``, reading (and dropping) anything it sent first."""
    start = time.monotonic()
    with anyio.fail_after(bound):
        try:
            while True:
                await stream.receive()
        except (anyio.EndOfStream, anyio.BrokenResourceError):
            return time.monotonic() - start


async def is_open(stream: SocketStream) -> bool:
    with anyio.move_on_after(0.3):
        try:
            await stream.receive()
        except (anyio.EndOfStream, anyio.BrokenResourceError):
            return False
    return True


@pytest.mark.parametrize("payload", [b"", b"GE", PARTIAL_HEADERS], ids=["nothing", "half a method", "no blank line"])
async def test_unfinished_headers_are_closed_after_the_header_timeout(payload: bytes) -> None:
    async with running_http(FakeGateway(), limits=SHORT) as url, connected(url, payload) as stream:
        assert 0.45 <= await seconds_until_closed(stream, bound=5) < 5


async def test_dripping_headers_do_not_move_the_deadline() -> None:
    """Slowloris proper: a byte every 0.1 s keeps the connection busy but not alive past the header timeout."""
    async with running_http(FakeGateway(), limits=SHORT) as url, connected(url) as stream:
        closed = anyio.Event()

        async def drip() -> None:
            try:
                for byte in PARTIAL_HEADERS * 10:
                    await stream.send(bytes([byte]))
                    await anyio.sleep(0.1)
            except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
                await closed.wait()

        async with anyio.create_task_group() as tg:
            tg.start_soon(drip)
            assert await seconds_until_closed(stream, bound=5) < 5
            closed.set()
            tg.cancel_scope.cancel()


async def test_a_kept_alive_connection_must_finish_its_next_request_in_time() -> None:
    async with running_http(FakeGateway(), limits=SHORT) as url, connected(url, HEALTH) as stream:
        assert b"200 OK" in await stream.receive()
        await stream.send(PARTIAL_HEADERS)
        # Closed by the header deadline, not by uvicorn's 5 s keep-alive (which the partial request cancels).
        assert await seconds_until_closed(stream, bound=3) < 3


async def test_unfinished_body_is_closed_after_the_body_timeout() -> None:
    limits = HttpLimits(header_timeout=60, body_timeout=0.5)
    async with running_http(FakeGateway(), limits=limits) as url, connected(url, PARTIAL_BODY) as stream:
        assert 0.45 <= await seconds_until_closed(stream, bound=5) < 5


async def test_headers_sent_slowly_but_in_time_are_served() -> None:
    async with running_http(FakeGateway(), limits=HttpLimits(header_timeout=3)) as url, connected(url) as stream:
        for i in range(0, len(HEALTH), 8):
            await stream.send(HEALTH[i : i + 8])
            await anyio.sleep(0.05)
        with anyio.fail_after(5):
            assert b"200 OK" in await stream.receive()


async def test_streams_outlive_the_deadlines() -> None:
    """A handshake-era GET stream and a 2026-era listen stream have complete requests: no deadline applies."""
    gateway = FakeGateway()
    pushed = anyio.Event()

    async def on_message(message: object) -> None:
        if getattr(message, "method", None) == "notifications/tools/list_changed":
            pushed.set()

    async with (
        running_http(gateway, limits=SHORT) as url,
        Client(url, mode="legacy", message_handler=on_message, read_timeout_seconds=10) as legacy,
        Client(url, read_timeout_seconds=10) as modern,
        modern.listen(tools_list_changed=True) as subscription,
    ):
        await legacy.list_tools()
        await anyio.sleep(1.5)  # three header and body timeouts
        gateway.change()
        with anyio.fail_after(10):
            await pushed.wait()
            async for _event in subscription:
                break
        assert not (await legacy.call_tool("run", {"code": "1"})).is_error


async def test_a_full_server_closes_the_connection_that_waited_longest() -> None:
    """Past the cap a new client is served at once (long before the 60 s header timeout) at a stalled one's cost."""
    limits = HttpLimits(header_timeout=60, max_connections=3)
    async with (
        running_http(FakeGateway(), limits=limits) as url,
        connected(url, b"GE") as oldest,
        connected(url, b"GE") as second,
        connected(url, b"GE") as third,
        httpx2.AsyncClient(timeout=5) as http,
    ):
        assert (await http.get(url.replace("/mcp", "/health"))).status_code == 200
        assert await seconds_until_closed(oldest, bound=2) < 2
        assert await is_open(second) and await is_open(third)


async def test_when_every_connection_is_mid_request_the_newcomer_is_closed() -> None:
    limits = HttpLimits(header_timeout=60, body_timeout=60, max_connections=2)
    async with (
        running_http(FakeGateway(), limits=limits) as url,
        connected(url, PARTIAL_BODY) as first,
        connected(url, PARTIAL_BODY) as second,
    ):
        await anyio.sleep(0.2)  # both requests' headers have been read
        async with connected(url, HEALTH) as newcomer:
            assert await seconds_until_closed(newcomer, bound=2) < 2
        assert await is_open(first) and await is_open(second)
