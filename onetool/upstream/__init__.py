"""The async MCP client pool: one owner task per upstream server."""

from onetool.upstream._pool import UpstreamPool
from onetool.upstream.status import ServerState, ServerStatus

__all__ = ["ServerState", "ServerStatus", "UpstreamPool"]
