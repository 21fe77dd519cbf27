"""The bridge's errors, on both sides: the service answers with ``status``; the gateway's client raises them.

OneToolError
└── BridgeError            status: the HTTP status that says what went wrong (400, 401, 404, 409, 429, 500)
    └── BridgeUnavailable  the bridge cannot be reached, or cannot start the server (503 to the gateway's caller)
"""

from __future__ import annotations

from onetool.errors import OneToolError

__all__ = ["BridgeError", "BridgeUnavailable"]


class BridgeError(OneToolError):
    def __init__(self, status: int, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.field = field
        """For a 400: the request field that was missing or wrong."""


class BridgeUnavailable(BridgeError):
    """Nothing changed: the bridge is unreachable, refused the token, or failed to start the server."""

    def __init__(self, message: str) -> None:
        super().__init__(503, f"bridge unavailable: {message}")
