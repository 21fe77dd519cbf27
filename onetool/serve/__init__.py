"""The gateway's faces and the transports that carry them.

app.py      the FACES table and everything ``onetool serve`` serves    http.py   the HTTP front: socket, uvicorn
run/        the `run` face (code mode)                                 stdio.py  MCP over stdin/stdout
inspect/    the inspect/exec face                                      limits.py HTTP limits: slow clients, floods
direct/     /mcp/direct: server:tool, and its management tools         fanout.py list_changed to both eras
admin/      /admin: the control plane's JSON API, OAuth logins         requests.py a call's client: progress, logs
ops.py      /health /ready /status    tools_module.py  /runtime/tools.py

The package exports the transports and the run face; ``onetool.serve.app`` brings every face.
"""

from onetool.httpd import HttpLimits
from onetool.serve._ops import ops_routes
from onetool.serve._stdio import serve_stdio
from onetool.serve.http import Listener, Routes, listen, mcp_routes, serve_http
from onetool.serve.run import RUN_INPUT_SCHEMA, build_run_server

__all__ = [
    "RUN_INPUT_SCHEMA",
    "HttpLimits",
    "Listener",
    "Routes",
    "build_run_server",
    "listen",
    "mcp_routes",
    "ops_routes",
    "serve_http",
    "serve_stdio",
]
