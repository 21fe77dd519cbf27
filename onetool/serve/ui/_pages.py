"""The console's pages under /ui: server-rendered HTML (Jinja2), each change a plain form POST.

Every change is a verb of the control plane's table (:mod:`onetool.control.actions`, as the admin API's are), made
by the actor "console" (an operator, as "cli" and "api" are), and sends the browser back (303) to the page it came
from, with what happened shown once there. Pages read fine without JavaScript; ``static/ui.js`` only adds the runs
page's live list (SSE) and a confirmation before removing, disabling or quarantining a server. Whatever a template
prints is marked where a reader would not see a character (:func:`_shown`, every template's finalize): upstreams and
models write most of it.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode, urlsplit

import anyio
from jinja2 import Environment, FileSystemLoader, select_autoescape
from markupsafe import Markup, escape
from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response, StreamingResponse
from starlette.routing import Mount, Route, Router
from starlette.staticfiles import StaticFiles

from onetool.auth import resolve_flow
from onetool.control.actions import BUTTON_VERBS, lookup
from onetool.errors import ArgumentError, ControlError, StateError
from onetool.logs import logger
from onetool.logs.runs import Mark
from onetool.metrics import RECENT_CALLS
from onetool.search import MAX_QUERY_CHARS
from onetool.serve.http import Routes
from onetool.serve.ui._review import review
from onetool.serve.ui._session import FREE_TRIES, Session, Sessions
from onetool.state.records import Actor
from onetool.text import visible

if TYPE_CHECKING:
    from onetool.core.gateway import Gateway

__all__ = ["Authorize", "Console", "ui_routes"]

Authorize = Callable[[str], Awaitable[str | None]]
"""Start the OAuth authorization-code flow of a server on this gateway: the URL to send the browser to."""

_HERE = Path(__file__).parent
_ACTOR: Actor = "console"
_AUTHORIZE = "authorize"
_FORM_VERBS = (*BUTTON_VERBS, _AUTHORIZE)
"""What a server page's buttons post: the table's, and starting an OAuth login."""
_AUDIT_ROWS = 200
_LIVE_SECONDS = 300.0
"""A live runs stream ends after this; the browser opens the next one by itself (so none outlives a shutdown),
from the last run it showed."""
_KEEPALIVE = 15.0
_RECONNECT_MS = 1_000
"""How soon a browser opens the next live runs stream: the page says "paused" only if that takes seconds."""


def _shown(value: Any) -> Any:
    """What every ``{{ expression }}`` of every template prints: a text with each character a reader would not see
    named (:func:`onetool.text.visible`, line breaks too), as names, errors, audit entries and tool tables come from
    upstreams and models; Jinja2 then escapes it. HTML a template or filter made already (``lines``, ``exact``, a
    macro) is left as it is."""
    if value is None or isinstance(value, bool | int | float) or hasattr(value, "__html__"):
        return value
    return visible(str(value), keep="")


def _lines(text: Any) -> Markup:
    """A text of several lines (a description, a schema, code; a list of lines, such as stderr's), its line breaks
    and tabs kept, every other character a reader would not see named; escaped."""
    joined = text if isinstance(text, str) else "\n".join(map(str, text))
    return escape(visible(joined))


_templates = Environment(loader=FileSystemLoader(_HERE / "templates"), autoescape=select_autoescape(), finalize=_shown)
_templates.filters["lines"] = _lines
_templates.filters["json"] = lambda value: _lines(json.dumps(value, indent=2, ensure_ascii=False, default=str))
# A value a form sends back (a held tool's name): exact, escaped, unmarked.
_templates.filters["exact"] = escape
_templates.filters["isotime"] = lambda epoch: datetime.fromtimestamp(epoch, UTC).isoformat(timespec="seconds")


def ui_routes(gateway: Gateway, sessions: Sessions, authorize: Authorize) -> Routes:
    """The console's pages, under /ui."""
    return Console(gateway, sessions, authorize).routes()


class Console:
    """The console's pages over ``gateway``: each endpoint a method, readable and testable alone; ``routes()``
    mounts them. Every page but signing in goes through :meth:`page` (a session, and a form's CSRF token)."""

    def __init__(self, gateway: Gateway, sessions: Sessions, authorize: Authorize) -> None:
        self.gateway = gateway
        self.control = gateway.control
        self.sessions = sessions
        self.authorize = authorize

    def render(
        self, request: Request, template: str, session: Session | None, status: int = 200, **context: Any
    ) -> Response:
        html = _templates.get_template(template).render(
            session=session,
            flash=session.told() if session is not None else None,
            path=request.url.path,
            **context,
        )
        return HTMLResponse(html, status_code=status, headers={"Cache-Control": "no-store"})

    def page(
        self,
        handler: Callable[[Request, Session], Awaitable[Response]],
    ) -> Callable[[Request], Awaitable[Response]]:
        """A page for a signed-in browser: others go to the sign-in page; a POST needs the session's CSRF token."""

        async def endpoint(request: Request) -> Response:
            session = self.sessions.of(request)
            if session is None:
                # Back to this page once signed in; after a form, to the page it was on (its change is not made:
                # its form token died with the session).
                came = request.url.path if request.method == "GET" else _back(request, "/ui/servers")
                return RedirectResponse(f"/ui/login?{urlencode({'next': came})}", status_code=303)
            if request.method == "POST":
                form = await request.form()
                csrf = form.get("csrf")
                if not Sessions.csrf_matches(session, csrf if isinstance(csrf, str) else None):
                    return Response("missing or stale form token: reload the page and try again", status_code=403)
            return await handler(request, session)

        return endpoint

    # ----- signing in ------------------------------------------------------------------------------

    async def login_form(self, request: Request) -> Response:
        then = _console_path(request.query_params.get("next"))
        if self.sessions.of(request) is not None:
            return RedirectResponse(then or "/ui/servers", status_code=303)
        return self.render(request, "login.html", None, then=then)

    async def login(self, request: Request) -> Response:
        form = await request.form()
        then = _console_path(_text(form, "next"))
        address = request.client.host if request.client is not None else "unknown"
        if (wait := math.ceil(self.sessions.sign_ins.wait(address))) > 0:
            error = f"Too many wrong admin tokens from this address: try again in {wait} s."
            refused = self.render(request, "login.html", None, 429, error=error, then=then)
            refused.headers["Retry-After"] = str(wait)
            return refused
        token = _text(form, "token")
        if token is None or not self.sessions.token_matches(token):
            wrong = self.sessions.sign_ins.missed(address)
            logger.warning("console: a sign-in with a wrong admin token from {} ({} in a row)", address, wrong)
            if wrong == FREE_TRIES:
                await self._audit("sign_in_slowed", {"from": address, "wrong_tokens": wrong})
            error = "That is not this gateway's admin token."
            return self.render(request, "login.html", None, 401, error=error, then=then)
        self.sessions.sign_ins.signed_in(address)
        await self._audit("sign_in", {"from": address})
        response = RedirectResponse(then or "/ui/servers", status_code=303)
        self.sessions.sign_in(response)
        return response

    async def _audit(self, action: str, details: dict[str, Any]) -> None:
        """Record a sign-in in the audit log; one the store cannot take now is logged, and signing in goes on."""
        try:
            await self.control.record(action, _ACTOR, details)
        except StateError as e:
            logger.warning("console: '{}' not recorded in the audit log: {}", action, e)

    async def logout(self, request: Request, _session: Session) -> Response:
        response = RedirectResponse("/ui/login", status_code=303)
        self.sessions.sign_out(request, response)
        return response

    # ----- servers ---------------------------------------------------------------------------------

    async def servers(self, request: Request, session: Session) -> Response:
        rows = [(view, RECENT_CALLS.summary(view.name)) for view in self.control.list()]
        return self.render(request, "servers.html", session, rows=rows, window=RECENT_CALLS.seconds)

    async def server(self, request: Request, session: Session) -> Response:
        name = request.path_params["name"]
        try:
            report = self.control.report(name)
        except ControlError as e:
            return self.render(request, "missing.html", session, e.status, message=str(e))
        summary = RECENT_CALLS.summary(name)
        return self.render(request, "server.html", session, server=report, tools=report["tools"], calls=summary)

    async def act(self, request: Request, session: Session) -> Response:
        name, verb = request.path_params["name"], request.path_params["action"]
        back = _back(request, f"/ui/servers/{name}")
        try:
            if verb == _AUTHORIZE:
                url = await self.authorize(name)
                if url is None:
                    raise ControlError(f"server '{name}' gave no authorization URL")
                return RedirectResponse(url, status_code=303)
            action = lookup(verb, _FORM_VERBS)
            tools = _tools(await request.form()) or None
            before = self.control.get(name)
            view = await action(self.control, name, tools, actor=_ACTOR)
        except (ControlError, StateError) as e:
            session.tell(False, str(e))
            return RedirectResponse(back, status_code=303)
        session.tell(True, action.said(name, view, tools, before))
        if view is None and back.startswith(f"/ui/servers/{name}"):
            back = "/ui/servers"  # its page is gone
        return RedirectResponse(back, status_code=303)

    async def tools(self, request: Request, session: Session) -> Response:
        query = request.query_params.get("query", "")
        await self.gateway.index.ready()
        try:
            hits, error = self.gateway.index.find(query, request.query_params.get("limit")), None
        except ArgumentError as e:
            hits, error = [], str(e)
        status = 400 if error else 200
        context = {"query": query, "hits": hits, "error": error, "max_query": MAX_QUERY_CHARS}
        return self.render(request, "tools.html", session, status, **context)

    # ----- review, runs, audit, OAuth -------------------------------------------------------------------

    async def review_page(self, request: Request, session: Session) -> Response:
        held = [review(h) for h in self.control.held()]
        quarantined = sorted({h.server for h in held if not h.changed})
        proposed = [view for view in self.control.list() if view.launch is not None]
        return self.render(request, "review.html", session, held=held, quarantined=quarantined, proposed=proposed)

    async def runs(self, request: Request, session: Session) -> Response:
        journal = self.gateway.journal
        recent, last = journal.recent(), journal.last()
        return self.render(request, "runs.html", session, runs=recent, last=last, **_show_code(self.gateway))

    async def run_events(self, request: Request, session: Session) -> Response:
        """The runs that end, as SSE events with their marks as ids: from the one after ``Last-Event-ID`` (a
        browser's reconnect) or ``?after=`` (the page's first stream: the last run it shows), so that a list that
        lost its stream for a while misses none; from now on without either."""
        row = _templates.get_template("_run_row.html")
        show = _show_code(self.gateway)
        journal = self.gateway.journal
        seen = Mark.parse(request.headers.get("last-event-id")) or Mark.parse(request.query_params.get("after"))

        async def events() -> AsyncIterator[str]:
            yield f"retry: {_RECONNECT_MS}\n\n"
            with anyio.move_on_after(_LIVE_SECONDS):
                async with journal.follow() as ended:
                    last = seen or journal.last()
                    while not self.gateway.drain.draining:
                        for run in journal.since(last):
                            html = row.render(run=run, **show)
                            data = "".join(f"data: {line}\n" for line in html.splitlines())
                            yield f"id: {run.mark}\nevent: run\n{data}\n"
                            last = run.mark or last
                        with anyio.move_on_after(_KEEPALIVE) as idle:
                            await ended.receive()
                        if idle.cancelled_caught:
                            yield ": still here\n\n"

        headers = {"Cache-Control": "no-store", "X-Accel-Buffering": "no"}
        return StreamingResponse(events(), media_type="text/event-stream", headers=headers)

    async def audit(self, request: Request, session: Session) -> Response:
        try:
            entries = await self.control.audit(limit=_AUDIT_ROWS)
        except StateError as e:
            return self.render(request, "missing.html", session, 503, message=str(e))
        return self.render(request, "audit.html", session, entries=entries)

    async def oauth(self, request: Request, session: Session) -> Response:
        rows = []
        for view in self.control.list():
            try:
                config = self.control.connects(view.name)
            except ControlError:
                continue  # a proposal: nothing may connect it, not even a login
            if config.oauth is None:
                continue
            stored = await self.gateway.tokens.load(view.name)
            tokens = stored.tokens if stored is not None else None
            rows.append(
                {
                    "server": view.name,
                    "status": view.oauth_status or "unknown",
                    "flow": resolve_flow(view.name, config.oauth),
                    "scopes": " ".join(config.oauth.scopes or []) or None,
                    "granted": tokens.scope if tokens is not None else None,
                    "expires_at": stored.expires_at if stored is not None else None,
                    "refused": stored.refused if stored is not None else None,
                }
            )
        return self.render(request, "oauth.html", session, rows=rows)

    async def home(self, request: Request) -> Response:
        return RedirectResponse("/ui/servers", status_code=303)

    def routes(self) -> Routes:
        """The console's routes, under /ui."""
        router = Router(
            [
                Route("/", self.home, methods=["GET"]),
                Route("/login", self.login_form, methods=["GET"]),
                Route("/login", self.login, methods=["POST"]),
                Route("/logout", self.page(self.logout), methods=["POST"]),
                Route("/servers", self.page(self.servers), methods=["GET"]),
                Route("/servers/{name}", self.page(self.server), methods=["GET"]),
                Route("/servers/{name}/{action}", self.page(self.act), methods=["POST"]),
                Route("/tools", self.page(self.tools), methods=["GET"]),
                Route("/review", self.page(self.review_page), methods=["GET"]),
                Route("/runs", self.page(self.runs), methods=["GET"]),
                Route("/runs/events", self.page(self.run_events), methods=["GET"]),
                Route("/audit", self.page(self.audit), methods=["GET"]),
                Route("/oauth", self.page(self.oauth), methods=["GET"]),
                Mount("/static", app=StaticFiles(directory=_HERE / "static"), name="static"),
            ]
        )
        return Routes([Mount("/ui", app=router)])


def _tools(form: FormData) -> list[str]:
    """The tool names a review form names."""
    return [t for t in form.getlist("tool") if isinstance(t, str)]


_CONSOLE_PATH = re.compile(r"/ui/[A-Za-z0-9_.~%/-]{0,200}")
"""A console page a sign-in may send the browser on to: a path of this console, never another site's URL."""
_SIGNING = frozenset({"/ui/login", "/ui/logout"})


def _console_path(path: str | None) -> str | None:
    """``path`` when it is a console page to go on to after signing in (not signing in or out), else None."""
    if path is None or not _CONSOLE_PATH.fullmatch(path) or path in _SIGNING:
        return None
    if any(part in ("", ".", "..") for part in path.split("/")[2:-1]) or path.endswith(("/.", "/..")):
        return None  # "//", "/./" or "/../": a path that leaves /ui, or means something other than it says
    return path


def _text(form: FormData, key: str) -> str | None:
    value = form.get(key)
    return value if isinstance(value, str) else None


def _back(request: Request, default: str) -> str:
    """The console page the form was on (its Referer's path), else ``default``: never another site."""
    referer = urlsplit(request.headers.get("referer", ""))
    if referer.path.startswith("/ui/") and referer.netloc == request.headers.get("host"):
        return referer.path
    return default


def _show_code(gateway: Gateway) -> dict[str, bool]:
    return {"show_code": gateway.config.ui.show_code}
