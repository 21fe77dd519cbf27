"""Which hosts count as loopback, by literal name: the rule behind plain-http upstreams; and which ``Host`` and
``Origin`` headers the HTTP front answers (:class:`HostRule`).

Serving decides by the address a host resolves to (onetool.serve.http.listen), through the same function.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from urllib.parse import urlsplit

__all__ = ["HostRule", "is_loopback", "plain_http_host"]


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


@dataclass(frozen=True)
class HostRule:
    """Which ``Host`` and ``Origin`` headers a listener answers: DNS-rebinding and cross-site protection, the same
    for every route of the HTTP front (probes, /metrics and /status included).

    A DNS-rebinding page reaches a gateway under the attacker's own DNS name, which its browser sends as ``Host``.
    So a request passes when its ``Host`` is one of ``hosts`` (this port's loopback names on a loopback listener,
    ``http.allowed_hosts``), or is no DNS name at all: absent (an HTTP/1.0 balancer check), an IP address (what a
    Kubernetes probe, a Prometheus scrape or a balancer sends: the pod's address), or the literal ``localhost``
    (a container's healthcheck, the CLI in the container), none of which such a page can send. ``hosts`` None:
    any Host (a listener beyond loopback with no allowed hosts; its token guards it).

    A browser sends ``Origin`` on cross-origin requests (and on a POST): it must be the request's own origin (its
    scheme and the Host that passed) or one of ``origins``, so a page on another port of this machine is refused
    too. ``origins`` None: any.
    """

    hosts: frozenset[str] | None
    origins: frozenset[str] | None
    scheme: str = "http"

    def refusal(self, host: str | None, origin: str | None) -> tuple[int, str] | None:
        """None when the request passes, else its HTTP status and why: 421 for the Host, 403 for the Origin."""
        if self.hosts is not None and not (host is None or host in self.hosts or _no_dns_name(host)):
            return 421, "unknown Host: DNS-rebinding protection (http.allowed_hosts names the hosts a proxy sends)"
        own = host is not None and origin == f"{self.scheme}://{host}"
        if origin is not None and self.origins is not None and not own and origin not in self.origins:
            return 403, "cross-origin request refused (http.allowed_origins names the origins allowed)"
        return None


def _no_dns_name(host: str) -> bool:
    """Whether a Host header (``name[:port]``) names an IP address or ``localhost``: no DNS-rebinding page can."""
    try:
        name = urlsplit(f"//{host}").hostname
    except ValueError:  # an unbalanced IPv6 bracket
        return False
    if not name:
        return False
    if name == "localhost":
        return True
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True
