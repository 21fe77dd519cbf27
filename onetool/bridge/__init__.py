"""``onetool bridge``: serve stdio MCP servers over streamable HTTP for a gateway that cannot run them.

The bridge (its own process):
    service.py   the /convert API and the bridge's lifetime     servers.py   each bridged server: port, child, endpoint
    proxy.py     the MCP server that forwards to one child      upstream.py  one child's pool: restarts, idle stops
    request.py   POST /convert's body
The gateway's side lives below, in the control plane: ``onetool.control.bridge_client`` (the API's client) and
``onetool.control.conversions`` (convert/revert/re-register + state). Both sides raise ``onetool.errors.BridgeError``.
"""
