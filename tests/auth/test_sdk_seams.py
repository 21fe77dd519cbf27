"""onetool.auth.provider builds on private methods of the `mcp` SDK's OAuth provider: the SDK has no public seam
for what OneTool changes there (a refresh made under the record's hold, DPoP proofs, step-up, the flow's own
errors). An SDK update that renames one, changes its parameters or stops calling it would break OneTool's OAuth
without an error; these tests name which, so the update is read before it is taken. The OAuth tests themselves
(test_refresh, test_dpop, test_step_up) show the overrides working."""

from __future__ import annotations

import inspect

import mcp.client.auth.oauth2 as sdk_oauth
import mcp.shared._httpx_utils as sdk_httpx
from mcp.client.auth import OAuthClientProvider
from mcp.client.auth.oauth2 import OAuthContext

from onetool.auth.provider import _Observed, _SigningContext

OVERRIDDEN = {
    "_initialize",
    "_auth_flow",
    "_refresh_token",
    "_handle_token_response",
    "_add_auth_header",
    "_perform_authorization",
    "async_auth_flow",
}
"""What OneTool's provider replaces of the SDK's (each calls the SDK's own through super())."""
USED = {"_handle_refresh_response"}
"""Private methods of the SDK it calls without replacing them."""
CALLED_BY_THE_SDK = {
    "_initialize": sdk_oauth,
    "_refresh_token": sdk_oauth,
    "_handle_refresh_response": sdk_oauth,
    "_add_auth_header": sdk_oauth,
    "_perform_authorization": sdk_oauth,
    "_handle_token_response": sdk_oauth,
    "_auth_flow": sdk_httpx,
}
"""Where the SDK's flow calls each: an override it no longer calls would do nothing."""


def _parameters(function: object) -> list[str]:
    return list(inspect.signature(function).parameters)  # type: ignore[arg-type]


def test_the_provider_overrides_exactly_these_methods_of_the_sdk_with_their_parameters() -> None:
    overridden = {
        name for name, value in vars(_Observed).items() if callable(value) and hasattr(OAuthClientProvider, name)
    }
    assert overridden == OVERRIDDEN
    for name in OVERRIDDEN:
        assert _parameters(getattr(_Observed, name)) == _parameters(getattr(OAuthClientProvider, name)), name
    for name in USED:
        assert callable(getattr(OAuthClientProvider, name, None)), f"the SDK no longer has {name}"
    assert _parameters(_SigningContext.prepare_token_auth) == _parameters(OAuthContext.prepare_token_auth)


def test_the_sdk_still_calls_what_the_provider_overrides() -> None:
    for name, module in CALLED_BY_THE_SDK.items():
        assert f"self.{name}(" in inspect.getsource(module), f"the SDK no longer calls {name}"
    assert "self.context.prepare_token_auth(" in inspect.getsource(sdk_oauth)
