"""What HTTP code outside ``auth`` may know about the OAuth flow: which requests the flow made, and how to quote
its failures safely.

Light on purpose (no SDK OAuth import): every HTTP upstream reads the mark, OAuth or not.
"""

from __future__ import annotations

from typing import Final

__all__ = ["OAUTH_REQUEST", "oauth_problem"]

OAUTH_REQUEST: Final = "onetool.oauth_request"
"""Marks (in ``Request.extensions``) a request the OAuth flow made: discovery, registration, token."""


def oauth_problem(problem: BaseException) -> str:
    """What an OAuth failure says, safe to show and log: its first line, capped. The SDK's errors about a token
    response the server sent go on with pydantic's echo of that response, tokens included."""
    return str(problem).split("\n", 1)[0][:300]
