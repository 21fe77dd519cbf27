"""Helpers for the server tests: the run face over HTTP on a free loopback port, in the test's task group."""

from __future__ import annotations

import ssl
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio

from onetool.serve import Listener, build_run_server, listen, mcp_routes, ops_routes, serve_http


def run_face_routes(gateway: Any, listener: Listener, *, stateless: bool = False) -> list[Any]:
    """The routes `onetool serve --http` mounts: the run face at /mcp and the ops routes (with no servers)."""
    return [mcp_routes("/mcp", build_run_server(gateway), listener, stateless=stateless), ops_routes(list, listener)]


@asynccontextmanager
async def running_http(
    gateway: Any,
    *,
    token: str | None = None,
    allowed_hosts: tuple[str, ...] = (),
    allowed_origins: tuple[str, ...] = (),
    stateless: bool = False,
    tls: ssl.SSLContext | None = None,
    **serve_kwargs: Any,
) -> AsyncIterator[str]:
    """serve_http on 127.0.0.1, port 0 (HTTPS with ``tls``); yields the /mcp URL once serving, cancels the server
    on exit."""
    ready = anyio.Event()
    hosts, origins = allowed_hosts, allowed_origins
    with listen("127.0.0.1", 0, token, allowed_hosts=hosts, allowed_origins=origins, tls=tls) as listener:
        async with anyio.create_task_group() as tg:
            routes = run_face_routes(gateway, listener, stateless=stateless)
            tg.start_soon(lambda: serve_http(listener, routes, on_ready=ready.set, **serve_kwargs))
            with anyio.fail_after(10):
                await ready.wait()
            yield listener.url("/mcp")
            tg.cancel_scope.cancel()
