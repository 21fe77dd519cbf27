"""The bridged servers: each one an upstream (its stdio child) and an MCP endpoint on a port of its own.

A server keeps its port, and so its URL, for as long as it is bridged: through crashes of its child
(the pool restarts it with backoff) and idle stops (the next request starts it again).
"""

from __future__ import annotations

import ssl
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Final

import anyio
import anyio.abc

from onetool.bridge._proxy import handshake, proxy_server
from onetool.bridge._upstream import BridgedUpstream
from onetool.config import ServerConfig
from onetool.errors import BridgeError, ServeError, UpstreamError
from onetool.logs import logger
from onetool.serve import Listener, Routes, listen, mcp_routes, serve_http

__all__ = ["BridgeLimits", "Bridged", "BridgedServers"]

MCP_PATH: Final = "/mcp"
_PORT_SCAN: Final = 1000  # ports tried from the base port upward before giving up
SHUTDOWN_SECONDS: Final = 5.0


@dataclass(frozen=True)
class BridgeLimits:
    base_port: int = 9001
    """Each server gets the first free port from here upward; 0: any free port."""
    max_servers: int | None = None
    idle_timeout: float | None = None
    """Seconds without a request after which a server's child is stopped (it starts again on the next one)."""
    backoff_base: float = 0.5


@dataclass
class Bridged:
    """One bridged server as the API shows it."""

    name: str
    listener: Listener
    upstream: BridgedUpstream
    _http: anyio.CancelScope = field(default_factory=anyio.CancelScope)
    _http_done: anyio.Event = field(default_factory=anyio.Event)

    @property
    def port(self) -> int:
        return self.listener.port

    def url(self, host: str) -> str:
        """Its URL for a client that reached the bridge at ``host`` (the port is the same on every address)."""
        host = f"[{host}]" if ":" in host else host
        return f"{self.listener.scheme}://{host}:{self.port}{MCP_PATH}"

    def view(self, host: str) -> dict[str, Any]:
        """As the API answers a client that reached the bridge at ``host``."""
        return {"serverName": self.name, "url": self.url(host), "port": self.port, "status": str(self.upstream.phase)}

    async def serve(self, routes: list[Routes]) -> None:
        """Serve the MCP endpoint until :meth:`close`."""
        try:
            with self._http:
                await serve_http(self.listener, routes)
        except ServeError as e:
            logger.bind(server=self.name).error("bridged server '{}': {}", self.name, e)
        finally:
            self._http_done.set()

    async def close(self) -> None:
        """Stop serving and stop the child; every process of it is gone when this returns."""
        self._http.cancel()
        async with anyio.create_task_group() as tg:
            tg.start_soon(self.upstream.stop)
            tg.start_soon(self._http_done.wait)
        self.listener.sock.close()


class BridgedServers:
    """Start, list and stop bridged servers; :meth:`running` owns their tasks."""

    def __init__(self, host: str, token: str | None, limits: BridgeLimits, tls: ssl.SSLContext | None = None) -> None:
        self._host = host
        self._token = token
        self._limits = limits
        self._tls = tls
        self._servers: dict[str, Bridged] = {}
        self._starting: set[str] = set()
        self._tg: anyio.abc.TaskGroup | None = None

    async def running(self, body: Callable[[], Awaitable[None]]) -> None:
        """Run ``body`` with servers available; then stop every one (within SHUTDOWN_SECONDS)."""
        async with anyio.create_task_group() as tg:
            self._tg = tg
            try:
                await body()
            finally:
                with anyio.CancelScope(shield=True), anyio.move_on_after(SHUTDOWN_SECONDS):
                    await self.close_all()
                tg.cancel_scope.cancel()

    def list(self) -> list[Bridged]:
        return list(self._servers.values())

    def get(self, name: str) -> Bridged:
        server = self._servers.get(name)
        if server is None:
            names = ", ".join(sorted(self._servers)) or "none"
            raise BridgeError(f"no bridged server '{name}' (bridged: {names})", 404)
        return server

    async def convert(self, name: str, config: ServerConfig) -> Bridged:
        """Start ``name`` and serve it on a port of its own (``Bridged.url`` per client)."""
        if name in self._servers or name in self._starting:
            raise BridgeError(f"server '{name}' is already converted; DELETE /convert/{name} first", 409)
        limit = self._limits.max_servers
        if limit is not None and len(self._servers) + len(self._starting) >= limit:
            raise BridgeError(f"the bridge serves at most {limit} servers (--max-servers); stop one first", 429)
        self._starting.add(name)
        try:
            listener = self._allocate()
            try:
                server = await self._start(name, config, listener)
            except BaseException:
                listener.sock.close()
                raise
            self._servers[name] = server
            return server
        finally:
            self._starting.discard(name)

    async def remove(self, name: str) -> None:
        server = self.get(name)
        del self._servers[name]
        await server.close()
        logger.bind(server=name).info("bridged server '{}' stopped", name)

    async def close_all(self) -> None:
        servers, self._servers = list(self._servers.values()), {}
        async with anyio.create_task_group() as tg:
            for server in servers:
                tg.start_soon(server.close)

    def _allocate(self) -> Listener:
        base = self._limits.base_port
        if base == 0:
            try:
                return listen(self._host, 0, self._token, tls=self._tls)
            except ServeError as e:
                raise BridgeError(str(e), 500) from None
        taken = {s.port for s in self._servers.values()}
        for port in range(base, min(base + _PORT_SCAN, 65536)):
            if port in taken:
                continue
            try:
                return listen(self._host, port, self._token, tls=self._tls)
            except ServeError:
                continue  # in use by someone else
        raise BridgeError(f"no free port in {base}-{base + _PORT_SCAN - 1} on {self._host} (--base-port)", 500)

    async def _start(self, name: str, config: ServerConfig, listener: Listener) -> Bridged:
        assert self._tg is not None, "convert() outside running()"
        upstream = BridgedUpstream(
            name, config, idle_timeout=self._limits.idle_timeout, backoff_base=self._limits.backoff_base
        )
        status = await self._tg.start(upstream.run)
        try:
            if not status.connected:
                raise BridgeError(f"cannot start server '{name}': {_reason(status.error, status.fix)}", 500)
            try:
                shake = await handshake(upstream)
            except UpstreamError as e:
                raise BridgeError(f"cannot start server '{name}': {e}", 500) from None
        except BaseException:
            with anyio.CancelScope(shield=True):
                await upstream.stop()
            raise
        server = Bridged(name, listener, upstream)
        routes = [mcp_routes(MCP_PATH, proxy_server(upstream, shake), listener)]
        self._tg.start_soon(server.serve, routes)
        where = server.url(self._host)
        logger.bind(server=name, url=where).info("bridged server '{}' serving at {}", name, where)
        return server


def _reason(error: str | None, fix: str | None) -> str:
    return "; ".join(part for part in (error or "it did not connect", fix) if part)
