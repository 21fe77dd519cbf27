"""OAuth 2.1 for HTTP upstreams, on the ``mcp`` SDK's client auth: flows, token storage, the browser step.

Importing this package imports ``mcp``; the CLI imports it only inside the ``auth`` command.
"""

from onetool.auth.flows import CallbackPage, FlowFailed, PendingFlow, PendingFlows
from onetool.auth.provider import AuthorizationRequired, Flow, browser_available, build_provider, resolve_flow
from onetool.auth.store import FileTokenStore, ServerStorage, StateTokenStore, StoredAuth, TokenStore, state_dir

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
    "resolve_flow",
    "state_dir",
]
