"""Errors a pool call raises; the snippet sees them as exceptions it may catch."""

from __future__ import annotations


class UpstreamError(Exception):
    """An upstream call failed: the upstream answered with a JSON-RPC error, or the transport broke."""

    def __init__(self, message: str, *, server: str, tool: str | None = None) -> None:
        super().__init__(message)
        self.server = server
        self.tool = tool


class UpstreamUnavailable(UpstreamError):
    """The server is disabled, failed to connect, or its connection dropped.

    Unless it is disabled, the pool keeps reconnecting in the background, and the message says so:
    the caller (a model, usually) learns that trying again later is worth it.
    """

    def __init__(self, server: str, reason: str, *, tool: str | None = None, retrying: bool = True) -> None:
        advice = "; OneTool keeps reconnecting in the background: retry later, or see proxy.list_servers()"
        super().__init__(
            f"server '{server}' is unavailable: {reason}{advice if retrying else ''}", server=server, tool=tool
        )
        self.reason = reason


class UpstreamTimeout(UpstreamError):
    """A tool call took longer than its timeout; the upstream was sent notifications/cancelled."""

    def __init__(self, server: str, tool: str, seconds: float) -> None:
        super().__init__(f"tool '{tool}' on server '{server}' timed out after {seconds} s", server=server, tool=tool)
        self.seconds = seconds
