"""The async MCP client pool: one owner task per upstream server."""

from onetool.upstream.connection import ServerStatus
from onetool.upstream.errors import UpstreamError, UpstreamTimeout, UpstreamUnavailable
from onetool.upstream.pool import UpstreamPool

__all__ = ["ServerStatus", "UpstreamError", "UpstreamPool", "UpstreamTimeout", "UpstreamUnavailable"]
