"""``onetool bridge``: serve stdio MCP servers over streamable HTTP for a gateway that cannot run them.

service.py   the /convert API and the bridge's lifetime      servers.py   each bridged server: port, child, endpoint
proxy.py     the MCP server that forwards to one child       upstream.py  one child's pool: restarts, idle stops
request.py   POST /convert's body                            client.py    the gateway's client of the API
errors.py    BridgeError, BridgeUnavailable
"""

from onetool.bridge.errors import BridgeError, BridgeUnavailable

__all__ = ["BridgeError", "BridgeUnavailable"]
