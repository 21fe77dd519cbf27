"""The operator's console, ``/ui``: servers, the review of quarantined and held tools, runs as they happen, the
audit log and OAuth, in a browser. Signed in with the admin token; every change is the control plane's own
operation, as through /admin.

Served where the admin token and the session cookie cannot be read on the way: on a loopback or TLS listener, or
where the config says so (``ui.allow_plain_http``); ``http.ui: false`` turns it off.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from onetool.logs import logger
from onetool.serve.http import Listener, Routes

if TYPE_CHECKING:
    from onetool.core.gateway import Gateway
    from onetool.serve.ui._pages import Authorize

__all__ = ["console_routes"]


def console_routes(gateway: Gateway, listener: Listener, admin_token: str, authorize: Authorize) -> Routes | None:
    """The console's routes, or None where it is not served (logged when the config asked for it)."""
    config = gateway.config
    if config.http.ui is False:
        return None
    if not (listener.loopback or listener.tls is not None or config.ui.allow_plain_http):
        if config.http.ui:
            logger.warning(
                "not serving /ui on {}: the admin token would cross the network unencrypted; serve TLS, or set "
                "ui.allow_plain_http",
                listener.url(""),
            )
        return None
    # Here, not at the top: a gateway that serves no console (stdio, or the console off) never loads Jinja2.
    from onetool.serve.ui._pages import ui_routes
    from onetool.serve.ui._session import Sessions

    logger.info("operator console at {} (sign in with the admin token)", listener.url("/ui/"))
    return ui_routes(gateway, Sessions(admin_token, secure=listener.tls is not None), authorize)
