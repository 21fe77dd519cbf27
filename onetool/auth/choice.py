"""Which OAuth flow a server uses, and whether this machine can run the authorization-code flow's browser step.

Apart from the SDK's OAuth client (in ``provider``), so a gateway can answer these without importing it.
"""

from __future__ import annotations

import os
import sys
import webbrowser
from typing import Literal

from onetool.config import OAuthConfig
from onetool.logs import logger

__all__ = ["Flow", "browser_available", "resolve_flow"]

Flow = Literal["authorization_code", "client_credentials"]
_CONSOLE_BROWSERS = {"www-browser", "links", "links2", "elinks", "lynx", "w3m"}


def browser_available() -> bool:
    """A graphical browser can be opened here (a text browser in this terminal would block the command)."""
    if sys.platform.startswith("linux") and not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")):
        return False
    try:
        browser = webbrowser.get()
    except webbrowser.Error:
        return False
    return getattr(browser, "name", "") not in _CONSOLE_BROWSERS


def resolve_flow(server: str, oauth: OAuthConfig) -> Flow:
    """The configured flow, else client credentials given a secret and no browser, else authorization code."""
    if oauth.flow is not None:
        return oauth.flow
    flow: Flow = "authorization_code"
    why = "no client secret" if oauth.client_secret is None else "a browser is available"
    if oauth.client_secret is not None and not browser_available():
        flow, why = "client_credentials", "a client secret and no browser"
    logger.bind(server=server, flow=flow).info("server '{}': OAuth flow {} (inferred: {})", server, flow, why)
    return flow
