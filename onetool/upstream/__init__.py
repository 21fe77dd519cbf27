"""The async MCP client pool: one owner task per upstream server."""

from onetool.upstream.connection import ServerStatus
from onetool.upstream.pool import UpstreamPool

__all__ = ["ServerStatus", "UpstreamPool"]
