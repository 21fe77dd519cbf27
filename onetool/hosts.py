"""Which hosts count as loopback, by literal name: the rule behind plain-http upstreams.

Serving decides by the address a host resolves to (onetool.serve.http.listen), through the same function.
"""

from __future__ import annotations

import ipaddress
from urllib.parse import urlsplit

__all__ = ["is_loopback", "plain_http_host"]


def is_loopback(host: str) -> bool:
    """127.0.0.0/8, ::1 (bracketed or not) and the literal name localhost.

    ``*.localhost`` names are not counted: a resolver may answer them with any address.
    """
    host = host.strip("[]").lower()
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def plain_http_host(url: str) -> str | None:
    """The host of ``url`` when it is plain ``http://`` to a host that is not loopback: what it carries (tokens
    included) crosses a network unencrypted. None for https and for loopback."""
    parts = urlsplit(url)
    if parts.scheme.lower() != "http":
        return None
    host = parts.hostname or ""
    return None if is_loopback(host) else host
