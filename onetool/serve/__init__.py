"""The gateway's faces and the transports that carry them: one module per face, route or transport.

run.py     the `run` face (code mode)          fanout.py  list_changed to clients of both eras
inspect.py the inspect/exec face
direct.py  the /mcp/direct face: server:tool   manage.py  its management tools (upstream_servers, ...)
stdio.py   MCP over stdin/stdout               http.py    the HTTP front: socket, routes, uvicorn
ops.py     /health /ready /status             admin.py   /admin: the control plane's JSON API
"""

from onetool.httpd import HttpLimits
from onetool.serve.admin import admin_routes
from onetool.serve.direct import build_direct_server
from onetool.serve.fanout import ChangeSubscription, ListChangedFanout, face_server
from onetool.serve.http import Listener, Routes, listen, mcp_routes, serve_http
from onetool.serve.inspect import build_inspect_server
from onetool.serve.ops import MCP_ENDPOINTS, ops_routes
from onetool.serve.run import RUN_INPUT_SCHEMA, GatewayLike, build_run_server
from onetool.serve.stdio import serve_stdio

__all__ = [
    "MCP_ENDPOINTS",
    "RUN_INPUT_SCHEMA",
    "ChangeSubscription",
    "GatewayLike",
    "HttpLimits",
    "ListChangedFanout",
    "Listener",
    "Routes",
    "admin_routes",
    "build_direct_server",
    "build_inspect_server",
    "build_run_server",
    "face_server",
    "listen",
    "mcp_routes",
    "ops_routes",
    "serve_http",
    "serve_stdio",
]
