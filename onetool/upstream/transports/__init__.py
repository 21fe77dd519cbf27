"""How the gateway reaches an upstream: one module per transport, one row per transport in :data:`TRANSPORTS`.

Every transport is an opener (``_base.Opener``): ``TRANSPORTS[config.transport].open(link)`` is an async context
manager that yields the SDK's (read, write) streams for ``mcp.Client``, and notes on the :class:`Link` what a
failure report needs (the child process, the HTTP statuses). The pool's connections and ``onetool auth`` open
servers through this table only; adding a transport is one module and one row (and its ``ServerConfig`` keys).

    _stdio.py            a child process in its own group (children.py records it; _process.py ends it)
    _streamable_http.py  streamable HTTP on our HTTP client      _sse.py  SSE, also streamable HTTP's fallback
    _http.py             the plain-http warning, loggable URLs, the HTTP client, the statuses it saw
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Final

from onetool.config import TransportName
from onetool.upstream.transports._base import Link, Opener, Streams, Transport
from onetool.upstream.transports._http import (
    TRUST_FIX,
    HttpStatuses,
    http_reason,
    untrusted_certificate,
    warn_plain_http,
)
from onetool.upstream.transports._process import StdioChild
from onetool.upstream.transports._sse import open_sse
from onetool.upstream.transports._stdio import open_stdio
from onetool.upstream.transports._streamable_http import open_streamable_http

__all__ = [
    "TRANSPORTS",
    "TRUST_FIX",
    "HttpStatuses",
    "Link",
    "Opener",
    "StdioChild",
    "Streams",
    "Transport",
    "http_reason",
    "untrusted_certificate",
    "warn_plain_http",
]

TRANSPORTS: Final[Mapping[TransportName, Transport]] = MappingProxyType(
    {
        "stdio": Transport("stdio", open_stdio),
        "http": Transport("streamable HTTP", open_streamable_http, fallback="sse"),
        "sse": Transport("SSE", open_sse),
    }
)
"""Transport name (``ServerConfig.transport``) -> its row."""
