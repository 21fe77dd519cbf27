"""Which hosts count as loopback, by literal name: the rule behind plain-http upstreams.

Serving decides by the address a host resolves to (onetool.serve.http.listen), through the same function.
"""

from __future__ import annotations

import ipaddress

__all__ = ["is_loopback"]


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
