"""Which OAuth flow a server uses, and whether this machine can run the authorization-code flow's browser step.

Apart from the SDK's OAuth client (in ``provider``), so a gateway can answer these without importing it.
"""

from __future__ import annotations

import os
import sys
import webbrowser

from onetool.config import OAuthConfig, OAuthGrant
from onetool.logs import logger

__all__ = ["Flow", "browser_available", "no_browser_step", "resolve_flow"]

Flow = OAuthGrant
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
    """The configured grant, else client credentials given a private key, or a secret and no browser, else the
    authorization code."""
    if oauth.grant is not None:
        return oauth.grant
    flow: Flow = "authorization_code"
    why = "no client secret" if oauth.client_secret is None else "a browser is available"
    if oauth.has_private_key:
        flow, why = "client_credentials", "a private key"
    elif oauth.client_secret is not None and not browser_available():
        flow, why = "client_credentials", "a client secret and no browser"
    logger.bind(server=server, flow=flow).info("server '{}': OAuth flow {} (inferred: {})", server, flow, why)
    return flow


def no_browser_step(server: str, flow: Flow) -> str | None:
    """Why ``onetool auth SERVER`` has nothing to do for this flow (None when it runs the browser step)."""
    if flow == "authorization_code":
        return None
    return (
        f"server '{server}' uses the {flow} grant: there is no browser step, OneTool obtains its tokens when it"
        " connects"
    )
