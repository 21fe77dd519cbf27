"""Who may use the console: a browser signs in once with the admin token and then holds a session cookie.

The cookie carries a random session id, never the token: HttpOnly (no script reads it), SameSite=Strict (no other
site's page sends it), Secure on TLS, scoped to /ui, for ``SESSION_SECONDS``. Every POST also carries the session's
CSRF token (a hidden field of each form), compared in constant time, and its ``Origin``, when the browser sends
one, must be this gateway's own. Sessions live in this process: signing out ends one at once, and a restart ends
them all (signing in again takes the token the operator already has).

Guessing the token is slowed down per client address (:class:`SignIns`): after ``FREE_TRIES`` wrong tokens, the
address must wait before its next try, twice as long after each further wrong one (up to ``MAX_WAIT``), and is told
so (429 with ``Retry-After``) without its token being looked at.
"""

from __future__ import annotations

import hmac
import secrets
import time
from collections import OrderedDict
from dataclasses import dataclass

from starlette.requests import Request
from starlette.responses import Response

__all__ = ["COOKIE", "FREE_TRIES", "MAX_WAIT", "SESSION_SECONDS", "Session", "Sessions", "SignIns"]

COOKIE = "onetool_ui"
SESSION_SECONDS = 12 * 3600
MAX_SESSIONS = 64
"""Sessions kept at once; signing in past it ends the oldest (a script that signs in in a loop costs nothing)."""
FREE_TRIES = 5
"""Wrong tokens an address may send before it has to wait (an operator mistypes; a script guesses)."""
FIRST_WAIT = 2.0
MAX_WAIT = 300.0
"""Seconds an address waits after its FREE_TRIES-th wrong token (FIRST_WAIT), doubled after each further one, at
most."""
_MAX_DOUBLINGS = 16
"""FIRST_WAIT doubled this many times is past MAX_WAIT already."""
FORGET_AFTER = 3600.0
"""An address that sent no wrong token for this long starts again with FREE_TRIES."""
MAX_ADDRESSES = 1024
"""Addresses whose wrong tokens are counted at once; past it the one counted longest ago is forgotten."""


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


@dataclass
class _Misses:
    count: int
    last: float
    until: float = 0.0


class SignIns:
    """Wrong admin tokens per client address, and how long each address must wait before its next sign-in."""

    def __init__(self) -> None:
        self._misses: OrderedDict[str, _Misses] = OrderedDict()

    def wait(self, address: str) -> float:
        """Seconds ``address`` must still wait before a sign-in is looked at (0: none)."""
        misses = self._misses.get(address)
        return max(0.0, misses.until - time.monotonic()) if misses is not None else 0.0

    def missed(self, address: str) -> int:
        """Count a wrong token from ``address``; how many it sent in a row."""
        now = time.monotonic()
        misses = self._misses.pop(address, None)
        if misses is None or now - misses.last > FORGET_AFTER:
            misses = _Misses(0, now)
        misses.count, misses.last = misses.count + 1, now
        if misses.count >= FREE_TRIES:
            # The exponent is bounded: a guess every MAX_WAIT for days must not overflow the float it makes.
            doublings = min(misses.count - FREE_TRIES, _MAX_DOUBLINGS)
            misses.until = now + min(MAX_WAIT, FIRST_WAIT * 2**doublings)
        self._misses[address] = misses
        while len(self._misses) > MAX_ADDRESSES:
            self._misses.popitem(last=False)
        return misses.count

    def signed_in(self, address: str) -> None:
        self._misses.pop(address, None)


class Sessions:
    def __init__(self, admin_token: str, *, secure: bool) -> None:
        self._token = admin_token
        self._secure = secure
        self._sessions: OrderedDict[str, Session] = OrderedDict()
        self.sign_ins = SignIns()

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
