"""OAuth 2.1 for HTTP upstreams, on the ``mcp`` SDK's client auth: flows, token storage, the browser step.

Names load lazily: a gateway imports only ``onetool.auth.store`` (the state store's token records), and the SDK's
OAuth machinery (``mcp.client.auth``, PyJWT, cryptography's x509) only once a configured server uses OAuth or an
``auth`` command runs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from onetool.lazy import lazy_exports

if TYPE_CHECKING:
    from onetool.auth.choice import Flow, browser_available, no_browser_step, resolve_flow
    from onetool.auth.flows import CallbackPage, FlowFailed, PendingFlow, PendingFlows
    from onetool.auth.provider import AuthorizationRequired, build_provider
    from onetool.auth.store import FileTokenStore, ServerStorage, StateTokenStore, StoredAuth, TokenStore, state_dir

_EXPORTS = {
    "CallbackPage": "flows",
    "FlowFailed": "flows",
    "PendingFlow": "flows",
    "PendingFlows": "flows",
    "AuthorizationRequired": "provider",
    "build_provider": "provider",
    "Flow": "choice",
    "browser_available": "choice",
    "no_browser_step": "choice",
    "resolve_flow": "choice",
    "FileTokenStore": "store",
    "ServerStorage": "store",
    "StateTokenStore": "store",
    "StoredAuth": "store",
    "TokenStore": "store",
    "state_dir": "store",
}

__all__ = [
    "AuthorizationRequired",
    "CallbackPage",
    "FileTokenStore",
    "Flow",
    "FlowFailed",
    "PendingFlow",
    "PendingFlows",
    "ServerStorage",
    "StateTokenStore",
    "StoredAuth",
    "TokenStore",
    "browser_available",
    "build_provider",
    "no_browser_step",
    "resolve_flow",
    "state_dir",
]

__getattr__ = lazy_exports(__name__, _EXPORTS)
