"""Who may use the console: a browser signs in once with the admin token and then holds a session cookie.

The cookie carries a random session id, never the token: HttpOnly (no script reads it), SameSite=Strict (no other
site's page sends it), Secure on TLS, scoped to /ui, for ``SESSION_SECONDS``. Every POST also carries the session's
CSRF token (a hidden field of each form), compared in constant time, and its ``Origin``, when the browser sends
one, must be this gateway's own. Sessions live in this process: signing out ends one at once, and a restart ends
them all (signing in again takes the token the operator already has).
"""

from __future__ import annotations

import hmac
import secrets
import time
from collections import OrderedDict
from dataclasses import dataclass

from starlette.requests import Request
from starlette.responses import Response

__all__ = ["COOKIE", "SESSION_SECONDS", "Session", "Sessions"]

COOKIE = "onetool_ui"
SESSION_SECONDS = 12 * 3600
MAX_SESSIONS = 64
"""Sessions kept at once; signing in past it ends the oldest (a script that signs in in a loop costs nothing)."""


@dataclass
class Session:
    id: str
    csrf: str
    expires: float
    flash: tuple[bool, str] | None = None
    """What the last change did (ok, message): shown once, on the page the change sends the browser back to."""

    def tell(self, ok: bool, message: str) -> None:
        self.flash = (ok, message)

    def told(self) -> tuple[bool, str] | None:
        flash, self.flash = self.flash, None
        return flash


class Sessions:
    def __init__(self, admin_token: str, *, secure: bool) -> None:
        self._token = admin_token
        self._secure = secure
        self._sessions: OrderedDict[str, Session] = OrderedDict()

    def token_matches(self, given: str) -> bool:
        return hmac.compare_digest(given.strip().encode(), self._token.encode())

    def sign_in(self, response: Response) -> Session:
        """A new session, its cookie set on ``response``."""
        session = Session(secrets.token_urlsafe(32), secrets.token_urlsafe(32), time.monotonic() + SESSION_SECONDS)
        self._sessions[session.id] = session
        while len(self._sessions) > MAX_SESSIONS:
            self._sessions.popitem(last=False)
        response.set_cookie(
            COOKIE,
            session.id,
            max_age=SESSION_SECONDS,
            path="/ui",
            httponly=True,
            samesite="strict",
            secure=self._secure,
        )
        return session

    def sign_out(self, request: Request, response: Response) -> None:
        self._sessions.pop(request.cookies.get(COOKIE, ""), None)
        response.delete_cookie(COOKIE, path="/ui", httponly=True, samesite="strict", secure=self._secure)

    def of(self, request: Request) -> Session | None:
        """The request's live session, if it has one."""
        session = self._sessions.get(request.cookies.get(COOKIE, ""))
        if session is None:
            return None
        if session.expires < time.monotonic():
            del self._sessions[session.id]
            return None
        return session

    @staticmethod
    def csrf_matches(session: Session, given: str | None) -> bool:
        return given is not None and hmac.compare_digest(given.encode(), session.csrf.encode())
