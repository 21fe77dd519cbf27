"""The one interface every transport implements: an opener that takes a :class:`Link` and yields the SDK's streams.

An opener is an async context manager factory. Entering it starts whatever carries the messages (a child
process, an HTTP client); its body is the session; leaving it ends that, within a bounded time, whatever the
session did. While it runs it writes what it knows about the wire onto the link (the child process, the HTTP
statuses), which the caller reads to say why a connect or a session failed.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field

import httpx2
from mcp.client._transport import TransportStreams

from onetool.config import ServerConfig, TransportName
from onetool.upstream._stderr import StderrTail
from onetool.upstream.children import Children
from onetool.upstream.transports._http import HttpStatuses, http_reason
from onetool.upstream.transports._process import StdioChild

Streams = TransportStreams
"""(read stream, write stream), as the SDK's ``Client`` takes them from a transport. The SDK's own name for it is
not public yet (``mcp.client._transport``, mcp 2.3)."""


@dataclass
class Link:
    """One opening of one server's transport: what its opener may use, and what the opener leaves for the caller."""

    name: str
    config: ServerConfig
    auth: httpx2.Auth | None = None
    """An HTTP transport authenticates with it: the server's OAuth provider."""
    stderr: StderrTail = field(default_factory=StderrTail)
    """Where a stdio child's stderr lines go: the connection's own tail, so a crashed child's last words stay."""
    children: Children | None = None
    """Records each stdio child's process group until the group has ended, so none outlives the gateway."""
    child: StdioChild | None = None
    """Set by the stdio transport: the process it started."""
    statuses: HttpStatuses | None = None
    """Set by the HTTP transports: the status of every response (401, 404 ... say why a connect failed)."""

    @property
    def too_long(self) -> str:
        """Why the gateway refused a message from the server: every transport caps one at ``max_message_mb``."""
        return f"sent a message longer than {self.config.max_message_mb} MB (servers.{self.name}.max_message_mb)"

    @property
    def url(self) -> str | None:
        """Where an HTTP transport connects: the configured URL as it is (the config refused plain http to another
        host unless ``allow_http`` says so)."""
        return self.config.url

    def refusal(self) -> str | None:
        """How the server said it does not speak this transport ("HTTP 404 Not Found"; a fallback may do), if it
        did."""
        if self.statuses is None or not self.statuses.refused():
            return None
        return http_reason(self.statuses.failed() or 0)


Opener = Callable[[Link], AbstractAsyncContextManager[Streams]]


@dataclass(frozen=True)
class Transport:
    """One row of the transports table."""

    label: str
    """As messages name it: "streamable HTTP"."""
    open: Opener
    fallback: TransportName | None = None
    """The transport a connection tries next when the server refused this one (:meth:`Link.refusal`)."""
