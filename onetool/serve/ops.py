"""Operational routes: GET /health, open to everyone for liveness probes."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from onetool.serve.http import Routes

__all__ = ["ops_routes"]


async def _health(_request: Request) -> JSONResponse:
    return JSONResponse({"status": "ok"})


def ops_routes() -> Routes:
    return Routes([Route("/health", _health, methods=["GET"])])
