"""``onetool bridge``: serve stdio MCP servers over streamable HTTP for a gateway that cannot run them.

The bridge (its own process):
    service.py   the /convert API and the bridge's lifetime     servers.py   each bridged server: port, child, endpoint
    proxy.py     the MCP server that forwards to one child      upstream.py  one child's pool: restarts, idle stops
    request.py   POST /convert's body
The gateway's side:
    client.py    BridgeClient, the API's client                 conversions.py  convert/revert/re-register + state
Both:
    errors.py    BridgeError, BridgeUnavailable
"""

from onetool.bridge.client import BridgeClient, Conversion
from onetool.bridge.conversions import Conversions, http_entry
from onetool.bridge.errors import BridgeError, BridgeUnavailable

__all__ = ["BridgeClient", "BridgeError", "BridgeUnavailable", "Conversion", "Conversions", "http_entry"]
