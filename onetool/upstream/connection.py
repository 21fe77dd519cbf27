"""One upstream server: an owner task that connects, serves, notices loss and reconnects; and its request path.

The SDK's transports and sessions hold anyio cancel scopes that must be exited by the
task that entered them, so each server's ``Client`` lives entirely inside one long-lived
owner task (:meth:`Connection.run`). Callers only await ``call_tool`` on the open client,
in their own task.

Beside a live session the owner runs watchers: handshake-era servers push `tools/list_changed`, 2026-era ones
answer a `subscriptions/listen` stream; a server that has answered nothing for a while is probed (ping), and one
that does not answer is dropped and reconnected; a session whose breaker opened is probed at growing intervals
until it answers (breaker.py).

A request is sent in the caller's task, within the server's cap on calls in flight
(``servers.NAME.max_concurrent_calls``). A server found disconnected gets one immediate reconnect attempt, shared
by every caller meanwhile (:meth:`Connection.revive`). A lost session fails the request at once, and it is sent
again on the next session only when it has no side effects (a read, or a tool annotated read-only or idempotent).
An unresponsive server (its breaker is open) fails requests at once.

An upstream that asks something during a tool call (``elicitation/create``, ``sampling/createMessage``,
``roots/list``) gets the answer of that call's client (asks.py, elicit.py), one request at a time per call and
within the call's timeout. The protocol does not say which call a request belongs to, so it goes to a client only
while that client's call is the server's only tool call in flight; otherwise a question gets the unattended answer,
a sampling request the protocol's error and roots/list the gateway's configured ``roots:``.
"""

from __future__ import annotations

import math
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from typing import Any, Final, Literal, TypeVar, cast, get_args

import anyio
import anyio.abc
import httpx2
import mcp.types as types
from mcp import Client, MCPError
from mcp.client.session import ClientRequestContext
from mcp.shared.dispatcher import ProgressFnT
from mcp.shared.subscriptions import ToolsListChanged, event_to_notification
from mcp.types import CONNECTION_CLOSED, LOG_LEVEL_META_KEY, REQUEST_TIMEOUT
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import ValidationError
from tenacity import AsyncRetrying, RetryCallState, retry_if_exception_type

from onetool import __version__
from onetool.auth.store import TokenStore
from onetool.config import ServerConfig, to_identifier
from onetool.errors import UpstreamError, UpstreamTimeout, UpstreamUnavailable
from onetool.logs import LogSpan, logger
from onetool.text import public_url
from onetool.upstream._backoff import ShortSession, backoff_wait
from onetool.upstream._oauth import UpstreamAuth
from onetool.upstream._results import ResultCheck
from onetool.upstream._session import (
    ListenStream,
    Lost,
    Session,
    Watched,
    closed_with,
    describe_failure,
    exit_failure,
    list_all_tools,
    lost_failure,
    stream_end,
)
from onetool.upstream._stderr import StderrTail
from onetool.upstream.asks import Caller, Refused, SampleResult, attributed_sampling
from onetool.upstream.children import Children
from onetool.upstream.elicit import attributed, unattended, with_defaults
from onetool.upstream.status import Failure, ServerState, ServerStatus, SettingName, config_key, unset_failure
from onetool.upstream.transports import TRANSPORTS, Link, Streams, warn_plain_http

__all__ = ["LEVELS", "Connection", "ConnectionOptions", "LogListener", "Mode", "Notify", "ProgressCallback"]

Mode = Literal["auto", "legacy"]
Notify = Callable[[str, types.ServerNotification], Awaitable[None]]
"""Called with (server, notification) for every notification an upstream sends; must not block."""
T = TypeVar("T")
LogListener = Callable[[types.LoggingMessageNotificationParams], None]
"""Gets an upstream's log messages as they arrive, at or above the level it was added with (the upstream is asked
for the most detailed level its listeners want); it must not block (it runs on the client's receive path)."""
ProgressCallback = ProgressFnT
"""(progress, total, message) of one tool call, as the upstream reports it."""

STOP_GRACE: Final = 3.0  # a stopping owner gets this long to close politely before it is cancelled
REVIVE_GAP: Final = 1.0
"""Seconds after a failed connect attempt during which a call fails with its reason instead of asking for another."""
NOTIFY_TIMEOUT: Final = 2.0
"""Seconds a notification the gateway passes on to a server may take to send."""
SET_LEVEL_TIMEOUT: Final = 2.0
"""Seconds the logging/setLevel a call sends first (a handshake-era server's level changed) may take."""
LEVELS: Final[tuple[types.LoggingLevel, ...]] = get_args(types.LoggingLevel)
"""MCP's log levels, most detailed first: what a level "at or above" another means, wherever the gateway filters."""
STOPPING: Final = "it is being stopped (an operator removed, disabled or restarted it just now)"
STOPPING_FIX: Final = "see proxy.list_servers() for what runs now"
QUEUE_WAIT: Final = 1.0
"""Seconds a request waits for one of its server's call slots before it fails: long enough to ride out a burst,
short enough that a run learns soon that the server is saturated."""


@dataclass(frozen=True)
class ConnectionOptions:
    """What every connection of one pool shares; the pool's constructor documents each (and holds the defaults)."""

    mode: Mode
    backoff_base: float
    stable_after: float
    probe_interval: float
    token_store: TokenStore | None = None
    on_notification: Notify | None = None
    children: Children | None = None
    setting_name: SettingName = config_key
    roots: tuple[types.Root, ...] = ()
    """What roots/list answers when the client of the call cannot be asked (the config's ``roots:``)."""


class Connection:
    """One server: its owner task (run, stop, revive), the watchers beside its live session, its request path."""

    def __init__(
        self, name: str, config: ServerConfig, options: ConnectionOptions, on_change: Callable[[str], None]
    ) -> None:
        self.name = name
        self.config = config
        self._options = options
        self._on_change = on_change
        self._stderr = StderrTail()  # across restarts: a crashed process's last lines stay for the operator
        self.status = ServerState.CONNECTING if config.enabled else ServerState.DISABLED
        self.failure: Failure | None = None if config.enabled else Failure("disabled")
        self._unusable = config.enabled and bool(config.unset_vars)
        """Its entry names variables that were not set: it fails alone, and no attempt would change that."""
        if self._unusable:
            self.status, self.failure = ServerState.FAILED, unset_failure(config.unset_vars)
        self._tools: list[types.Tool] = []
        self._listed: dict[str, str] = {}  # the names of its last non-empty catalogue: see known_tool
        self.protocol_version: str | None = None
        self.instructions: str | None = None
        self.first_attempt = anyio.Event()
        self._session: Session | None = None  # the live session calls may use
        self.capabilities: types.ServerCapabilities | None = None  # what the live session's server declared
        self._latest: Session | None = None  # the last session that connected, live or not
        self._call_slots = anyio.Semaphore(config.max_concurrent_calls, fast_acquire=True)
        self._attempting = False  # the owner is connecting
        self._attempt_done = anyio.Event()  # set when the current (or else the next) connect attempt ends
        self._failed_at = -math.inf  # when the last connect attempt failed
        self._hurry = anyio.Event()  # a caller wants the server now: the owner's pause before reconnecting ends
        self._stopping = False
        self._ever_connected = False
        self._scope = anyio.CancelScope()
        self.log_listeners: dict[LogListener, types.LoggingLevel] = {}
        self.watched: set[str] = set()
        """Resources whose updates a 2026-era session's listen stream asks for (a handshake-era session is asked by
        ``resources/subscribe``: onetool.serve._catalogue_items)."""
        self._askers: dict[object, _Asker | None] = {}  # per tool call in flight: who answers its requests
        self._auth = (
            UpstreamAuth(name, config.url or "", config, options.token_store)
            if config.oauth is not None and config.enabled
            else None
        )
        if config.enabled:
            warn_plain_http(name, config)

    @property
    def tools(self) -> list[types.Tool]:
        """The server's catalogue while it is connected (else empty)."""
        return self._tools

    @tools.setter
    def tools(self, tools: list[types.Tool]) -> None:
        self._tools = tools
        if tools:
            self._listed = {**{to_identifier(t.name): t.name for t in tools}, **{t.name: t.name for t in tools}}

    def known_tool(self, name: str) -> str | None:
        """The upstream name of the tool ``name`` names (its own name or its identifier, as a snippet writes it) in
        the last catalogue the server listed, kept while it is down; None for a name it never listed."""
        return self._listed.get(name)

    def snapshot(self) -> ServerStatus:
        failure = self.failure
        session = self._session
        return ServerStatus(
            name=self.name,
            pack=to_identifier(self.name),
            type=self.config.transport,
            enabled=self.config.enabled,
            status=self.status,
            error=failure.reason if failure else None,
            tool_count=len(self.tools),
            protocol_version=self.protocol_version,
            instructions=self.instructions,
            detail=failure.detail if failure else None,
            fix=failure.fix if failure else None,
            oauth_status=self._auth.status(self.status, failure) if self._auth else None,
            unresponsive=session.breaker.describe() if session and session.breaker.open else None,
            calls_in_flight=self.config.max_concurrent_calls - self._call_slots.value,
            stderr=tuple(self._stderr.lines()),
        )

    # ----- the owner task -------------------------------------------------------------------

    async def run(self) -> None:
        """Connect, serve until lost, reconnect with backoff; until :meth:`stop`.

        The backoff (backoff.py) goes on growing across sessions that end before ``stable_after`` seconds, and
        starts over only after a stable one; a caller that finds the server disconnected cuts a pause short
        (:meth:`revive`).
        """
        with self._scope:
            try:
                while not self._stopping and not self._unusable:
                    retrying = AsyncRetrying(
                        wait=backoff_wait(self._options.backoff_base, self.config.max_backoff),
                        retry=retry_if_exception_type(Exception),
                        sleep=self._pause,
                        before_sleep=self._log_retry,
                    )
                    async for attempt in retrying:
                        with attempt:
                            uptime = await self._connect_and_serve()
                            if uptime < self._options.stable_after and not self._stopping:
                                raise ShortSession(uptime)
                    if not self._stopping:
                        # A stable session broke; a short pause keeps a crash loop from spinning.
                        await self._pause(self._options.backoff_base)
            finally:
                self.first_attempt.set()
                self._attempt_done.set()  # no attempt follows
                self._session = None
                if self._stopping:
                    self._set_status(ServerState.DISCONNECTED, Failure("the pool is closed"))

    async def revive(self) -> bool:
        """Whether the server is connected, after one immediate connect attempt if it was not.

        The owner makes the attempt (it owns the connection); every caller meanwhile shares it (single flight).
        A failed attempt less than REVIVE_GAP ago answers for a new one: a burst of calls to a server that is
        down costs one attempt a second, not one each.
        """
        if self._session is not None and not self._session.lost:
            return True
        if self._stopping or not self.config.enabled or self._unusable:
            return False
        if not self._attempting:
            if anyio.current_time() - self._failed_at < REVIVE_GAP:
                return False
            self._hurry.set()
        # The owner may first have to close the lost session (a stdio child gets a grace period to exit).
        with anyio.move_on_after(self.config.connect_timeout + STOP_GRACE):
            await self._attempt_done.wait()
        return self._session is not None and not self._session.lost

    async def _pause(self, seconds: float) -> None:
        """Wait before the next connect attempt, unless a caller wants the server now (:meth:`revive`)."""
        with anyio.move_on_after(seconds):
            await self._hurry.wait()

    def _attempt_over(self) -> None:
        """A connect attempt ended (connected or not): wake whoever waits on it."""
        self.first_attempt.set()
        if self._attempting:
            self._attempting = False
            done, self._attempt_done = self._attempt_done, anyio.Event()
            done.set()

    def stop(self) -> None:
        """Ask the owner to close its session politely; it is cancelled if that takes too long."""
        self._stopping = True
        self._scope.deadline = min(self._scope.deadline, anyio.current_time() + STOP_GRACE)
        if self._session is not None and self.status is ServerState.CONNECTED:
            self._session.wake.set()
        else:
            self._scope.cancel()

    def _log_retry(self, state: RetryCallState) -> None:
        delay = state.next_action.sleep if state.next_action else 0.0
        error = state.outcome.exception() if state.outcome else None
        what = str(error) if isinstance(error, ShortSession) else f"reconnect attempt {state.attempt_number} failed"
        logger.bind(server=self.name, attempt=state.attempt_number, delay=round(delay, 3)).info(
            "server '{}': {} ({}); next in {:.1f} s",
            self.name,
            what,
            self.failure and self.failure.for_operators(),
            delay,
        )

    async def _connect_and_serve(self) -> float:
        """One connect attempt and, if it succeeds, the session's life; how long the session was up."""
        session = Session(self._link(), self._auth)
        self._attempting = True
        self._hurry = anyio.Event()
        try:
            with anyio.CancelScope(deadline=anyio.current_time() + self.config.connect_timeout) as deadline:
                async with AsyncExitStack() as stack:
                    with LogSpan("proxy.connect", server=self.name, type=self.config.transport, toolCount=0) as span:
                        failure: Failure | None
                        try:
                            client = await self._open(stack, session)
                            tools = await list_all_tools(client)
                        except anyio.get_cancelled_exc_class():
                            if self._stopping:
                                raise
                            if deadline.cancel_called:
                                failure = Failure(f"connect timed out after {self.config.connect_timeout} s")
                            elif (crash := await closed_with(stack)) is not None:
                                # A transport task failed (e.g. the OAuth flow on a 401 after initialize)
                                # and cancelled us; closing the stack surfaces why.
                                failure = self._describe(crash, session)
                                span.attach(crash, expected=not failure.unexpected)
                            else:
                                raise
                        except Exception as e:
                            failure = self._describe(e, session)
                            span.attach(e, expected=not failure.unexpected)
                        else:
                            failure = None
                        if failure is not None:
                            span.add(detail=failure.detail)
                            # "failed" until the server was up once; after that a failed reconnect stays "disconnected".
                            state = ServerState.DISCONNECTED if self._ever_connected else ServerState.FAILED
                            self._set_status(state, failure)
                            self._failed_at = anyio.current_time()
                            raise UpstreamUnavailable(self.name, failure.reason, fix=failure.fix)
                        span.add(toolCount=len(tools))
                    deadline.deadline = math.inf
                    await self._serve(session, client, tools)
        except UpstreamUnavailable:
            raise
        except Exception as e:
            if session.client is None:
                raise
            # A transport task died under a live session (the SDK raises it when the client exits):
            # the session is over, and run() reconnects as after any other loss.
            if not self._stopping:
                failure = session.lost or self._describe(e, session)
                self._set_status(ServerState.DISCONNECTED, lost_failure(failure))
            logger.bind(server=self.name).debug("server '{}': session ended with {!r}", self.name, e)
            return session.uptime()
        finally:
            self._attempt_over()
        if session.lost and session.link.child is not None:
            # The process is reaped now, so its exit status and last stderr line are known.
            self._set_status(ServerState.DISCONNECTED, lost_failure(exit_failure(session)))
        return session.uptime()

    def _describe(self, error: BaseException, session: Session) -> Failure:
        return describe_failure(error, session, self.name, self.config, self._options.setting_name)

    def _link(self) -> Link:
        """A connect attempt's opening of the transport, the OAuth provider made to read the store again (another
        process may have authorized meanwhile)."""
        if self._auth is not None:
            self._auth.begin_attempt()
        return Link(
            self.name,
            self.config,
            auth=self._auth.auth if self._auth is not None else None,
            stderr=self._stderr,
            children=self._options.children,
        )

    async def _open(self, stack: AsyncExitStack, session: Session) -> Client:
        """Enter a connected Client on ``stack`` through the server's transport, or its fallback if it was refused
        (streamable HTTP -> SSE)."""
        link = session.link
        transport = TRANSPORTS[self.config.transport]
        while True:
            try:
                client = await stack.enter_async_context(
                    self._client(self._watch(transport.open(link), session), session)
                )
                break
            except Exception:
                refusal = link.refusal()
                if transport.fallback is None or refusal is None:
                    raise
            fallback = TRANSPORTS[transport.fallback]
            logger.bind(server=self.name, url=public_url(link.url or "")).info(
                "server '{}' refused {} ({}); trying {}", self.name, transport.label, refusal, fallback.label
            )
            transport = fallback
        # Structured results are checked within bounds, against the catalogue the pool keeps (_results.py).
        client.session.validate_tool_result = ResultCheck(lambda: self.tools)  # type: ignore[method-assign]
        return client

    def _client(self, transport: Any, session: Session) -> Client:
        async def on_message(message: Any) -> None:
            # Handshake-era servers push this; 2026-era ones answer a listen stream (see _listen).
            if getattr(message, "method", None) == "notifications/tools/list_changed":
                session.refresh.set()
            notify = self._options.on_notification
            if notify is not None and not isinstance(message, Exception):
                await notify(self.name, message)

        async def on_log(params: types.LoggingMessageNotificationParams) -> None:
            shown = LEVELS.index(params.level)
            for listener, level in list(self.log_listeners.items()):
                if shown >= LEVELS.index(level):
                    listener(params)

        return Client(
            transport,
            mode="legacy" if self.config.protocol == "2025-11-25" else self._options.mode,
            read_timeout_seconds=self.config.timeout,
            message_handler=on_message,
            logging_callback=on_log,
            elicitation_callback=self._on_elicit,
            # Declared to every upstream (server-everything lists its sampling and roots tools only then); what a
            # request gets depends on the call it comes during.
            sampling_callback=self._on_sample,
            list_roots_callback=self._on_list_roots,
            # No level on every request: a 2026-era server logs only on a call that opts in (see call).
            log_level=None,
            client_info=types.Implementation(name="onetool", version=__version__),
            cache=None,  # the pool keeps its own catalogue and refetches it on list_changed
        )

    def _asker(self) -> _Asker | None:
        """The client of the server's only tool call in flight; None when there are several, or it has none."""
        askers = list(self._askers.values())
        return askers[0] if len(askers) == 1 else None

    async def _on_elicit(
        self, context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult | types.ErrorData:
        """The upstream asks a user something: the client of its only tool call in flight answers, if it can, asked
        with the server named (:func:`attributed`)."""
        ask = self._asker()
        shown = attributed(self.name, params)
        cancel = types.ElicitResult(action="cancel")
        try:
            answer = await ask.ask(lambda caller: caller.elicit(shown), lambda: cancel) if ask is not None else None
        except Refused as refused:
            logger.bind(server=self.name, mode=params.mode).warning(
                "server '{}' asked its user: not asked: {}", self.name, refused
            )
            answer = None
        asked = answer is not None
        if answer is None:
            answer = unattended(params, defaults_accepted=self.config.unattended_elicitation == "defaults")
        logger.bind(server=self.name, mode=params.mode, asked=asked, action=answer.action).info(
            "server '{}' elicited: {}", self.name, answer.action
        )
        return with_defaults(params, answer)

    async def _on_sample(
        self, context: ClientRequestContext, params: types.CreateMessageRequestParams
    ) -> SampleResult | types.ErrorData:
        """The upstream asks for a completion: the client of its only tool call in flight gives it, if it declared
        sampling, the server may sample (``servers.NAME.sampling``) and the run has sampling left; otherwise the
        upstream gets the protocol's error at once, and the log says why."""
        try:
            result = await self._sample(params)
        except Refused as refused:
            logger.bind(server=self.name, maxTokens=params.max_tokens).warning(
                "server '{}' asked to sample: refused: {}", self.name, refused
            )
            return refused.error()
        logger.bind(server=self.name, maxTokens=params.max_tokens, stopReason=result.stop_reason).info(
            "server '{}' sampled", self.name
        )
        return result

    async def _sample(self, params: types.CreateMessageRequestParams) -> SampleResult:
        if self.config.sampling == "deny":
            raise Refused(f"sampling is denied to server '{self.name}' (servers.{self.name}.sampling: deny)")
        ask = self._asker()
        if ask is None:
            raise Refused(
                f"no client to ask: sampling goes to the client of a call to server '{self.name}' while it is the"
                " server's only call in flight"
            )

        def late() -> SampleResult:
            raise Refused("the call this request came during ended, or its deadline passed")

        shown = attributed_sampling(self.name, params)
        result = await ask.ask(lambda caller: caller.sample(shown), late)
        if result is None:
            raise Refused("the client of this call did not declare the sampling capability")
        return result

    async def _on_list_roots(self, context: ClientRequestContext) -> types.ListRootsResult | types.ErrorData:
        """The upstream asks for the roots: those of the client of its only tool call in flight, when it declared
        them, else the gateway's configured ``roots:``."""
        ask = self._asker()
        roots = await ask.ask(lambda caller: caller.list_roots(), lambda: None) if ask is not None else None
        asked = roots is not None
        if roots is None:
            roots = types.ListRootsResult(roots=list(self._options.roots))
        logger.bind(server=self.name, asked=asked, roots=len(roots.roots)).info(
            "server '{}' listed roots ({})", self.name, "the client's" if asked else "the config's"
        )
        return roots

    @asynccontextmanager
    async def _watch(self, transport: AbstractAsyncContextManager[Streams], session: Session) -> AsyncIterator[Streams]:
        async with transport as (read, write):
            yield Watched(read, lambda: self._lose(session, stream_end(session))), write

    async def _serve(self, session: Session, client: Client, tools: list[types.Tool]) -> None:
        session.client = client
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(self._refresh_on_change, session, client)
                tg.start_soon(self._probe, session, client)
                tg.start_soon(self._mind_breaker, session, client)
                if client.protocol_version in MODERN_PROTOCOL_VERSIONS:
                    # Subscribed before the server counts as connected, so no change slips through.
                    await tg.start(self._listen, session, client)
                self._session = self._latest = session
                self.tools = tools
                self.protocol_version = client.protocol_version
                self.instructions = client.instructions
                self.capabilities = client.server_capabilities
                session.connected_at = session.answered_at = anyio.current_time()
                self._set_status(ServerState.CONNECTED, None)
                if self._ever_connected:
                    logger.bind(server=self.name, toolCount=len(tools)).info(
                        "server '{}' reconnected ({} tools)", self.name, len(tools)
                    )
                self._ever_connected = True
                self._attempt_over()
                await session.wake.wait()
                tg.cancel_scope.cancel()
        finally:
            self._session = None

    def _lose(self, session: Session, failure: Failure) -> None:
        """The session broke: fail its calls now, mark the server disconnected, wake the owner."""
        if session.lost or self._stopping:
            return
        if session.auth is not None:
            failure = session.auth.failure(session.link.statuses) or failure
        session.lost = failure
        for scope in session.calls:
            scope.cancel()
        session.wake.set()
        # The owner may already be unwinding this session (self._session cleared); it is still the latest.
        if self._latest is session:
            self._set_status(ServerState.DISCONNECTED, lost_failure(failure))

    def _set_status(self, status: ServerState, failure: Failure | None) -> None:
        changed = (status, failure) != (self.status, self.failure)
        if self.status is ServerState.CONNECTED and status is not ServerState.CONNECTED and not self._stopping:
            logger.bind(server=self.name).warning(
                "server '{}' disconnected: {}", self.name, failure.for_operators() if failure else status
            )
        self.status, self.failure = status, failure
        if self._auth is not None:
            self._auth.report(status, failure)
        if status is not ServerState.CONNECTED:
            self.tools = []
        if changed:
            self._on_change(self.name)

    # ----- beside a live session (in the owner task) ---------------------------------------------

    async def _refresh_on_change(self, session: Session, client: Client) -> None:
        while True:
            await session.refresh.wait()
            session.refresh = anyio.Event()
            try:
                with anyio.fail_after(self.config.connect_timeout):
                    self.tools = await list_all_tools(client)
            except Exception as e:
                logger.bind(server=self.name).warning(
                    "server '{}': refreshing the tool list failed: {}",
                    self.name,
                    self._describe(e, session).for_operators(),
                )
                continue
            logger.bind(server=self.name, toolCount=len(self.tools)).info("server '{}': tool list changed", self.name)
            self._on_change(self.name)

    async def _probe(self, session: Session, client: Client) -> None:
        """Probe the server whenever it has answered nothing for ``probe_interval`` seconds; drop the session if
        the probe gets no answer within ``connect_timeout``.

        A stdio child's death closes its stdout, which the transport notices at once, but a hung or stopped one
        says nothing, and neither does an idle HTTP session whose server died. Dropping the session restarts a
        stdio child and reconnects either kind.
        """
        while True:
            quiet = anyio.current_time() - session.answered_at
            if quiet < self._options.probe_interval:
                await anyio.sleep(self._options.probe_interval - quiet)
                continue
            try:
                with anyio.fail_after(self.config.connect_timeout):
                    await self._ping(session, client)
            except TimeoutError:
                reason = f"no answer to a ping within {self.config.connect_timeout} s"
                self._lose(session, Failure(f"health check failed: {reason}"))
                return
            except Exception as e:
                failure = self._describe(e, session)
                self._lose(session, Failure(f"health check failed: {failure.reason}", failure.detail))
                return

    async def _mind_breaker(self, session: Session, client: Client) -> None:
        """Each time the session's breaker opens: probe at growing intervals (the reconnect backoff, capped at
        ``max_backoff``) until the server answers, then close it."""
        breaker = session.breaker
        while True:
            await breaker.tripped.wait()
            logger.bind(server=self.name, timeouts=breaker.timeouts).warning(
                "server '{}' is unresponsive: {} calls in a row timed out; calls to it fail at once until it answers "
                "a ping",
                self.name,
                breaker.timeouts,
            )
            self._on_change(self.name)

            async def wait(delay: float) -> None:
                breaker.probe_at = anyio.current_time() + delay
                await anyio.sleep(delay)

            await wait(self._options.backoff_base)
            async for attempt in AsyncRetrying(
                wait=backoff_wait(self._options.backoff_base, self.config.max_backoff),
                retry=retry_if_exception_type(Exception),
                sleep=wait,
            ):
                with attempt, anyio.fail_after(self.config.connect_timeout):
                    await self._ping(session, client)
            breaker.close()
            logger.bind(server=self.name).info("server '{}' answers again: calls to it resume", self.name)
            self._on_change(self.name)

    async def _ping(self, session: Session, client: Client) -> None:
        """MCP ping on a handshake-era session. 2026-07-28 removed ping: there the probe is ``tools/list``, which
        every server serves, and whose answer also catches a catalogue change the server never announced."""
        if client.protocol_version not in MODERN_PROTOCOL_VERSIONS:
            await client.session.send_ping()
        else:
            tools = await list_all_tools(client)
            if tools != self.tools:
                self.tools = tools
                self._on_change(self.name)
        session.answered()

    async def _listen(
        self,
        session: Session,
        client: Client,
        *,
        task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
    ) -> None:
        """Hold the session's ``subscriptions/listen`` stream: its catalogue's changes, and the updates of the
        watched resources; opened again whenever those change (:meth:`watch`)."""
        started = False
        try:
            while True:
                with anyio.CancelScope(deadline=anyio.current_time() + self.config.connect_timeout) as deadline:
                    listen = client.listen(
                        tools_list_changed=True,
                        prompts_list_changed=True,
                        resources_list_changed=True,
                        resource_subscriptions=sorted(self.watched),
                    )
                    async with listen as events, anyio.create_task_group() as tg:
                        deadline.deadline = math.inf
                        replaced = session.stream
                        stream = session.stream = ListenStream(frozenset(events.honored.resource_subscriptions or ()))
                        if replaced is not None:
                            replaced.replaced.set()
                            session.refresh.set()  # nothing is replayed between two streams: list the tools again
                        if not started:
                            task_status.started()
                            started = True
                        tg.start_soon(_cancel_on, stream.reopen, tg.cancel_scope)
                        async for event in events:
                            if isinstance(event, ToolsListChanged):
                                session.refresh.set()
                            elif (notify := self._options.on_notification) is not None:
                                # Its prompts, resources and watched resources: told as a handshake-era server
                                # tells them.
                                await notify(self.name, event_to_notification(event, {}))
                        tg.cancel_scope.cancel()
                if not (session.stream is not None and session.stream.reopen.is_set()) or deadline.cancelled_caught:
                    break  # the stream ended (or would not open): nothing more comes this session
        except Exception as e:
            # Not every 2026-era server serves subscriptions/listen; its catalogue is then static.
            logger.bind(server=self.name).debug("server '{}': no subscriptions/listen stream: {}", self.name, e)
        finally:
            if session.stream is not None:
                session.stream.replaced.set()  # nobody waits for a stream that will not come
        if not started:
            task_status.started()

    async def watch(self, uri: str, *, on: bool = True) -> None:
        """Have this server's 2026-era listen stream carry ``uri``'s updates (``on``), or no longer; returns once
        the stream that does is open. A server not connected now is asked when it connects. An MCPError when the
        server will not send them."""
        if on == (uri in self.watched):
            session = self._session
            if session is None or session.stream is None or on == (uri in session.stream.resources):
                return
        (self.watched.add if on else self.watched.discard)(uri)
        session = self._session
        if session is None or session.stream is None:
            return
        stream = session.stream
        stream.reopen.set()
        with anyio.fail_after(self.config.connect_timeout):
            await stream.replaced.wait()
        if session.stream is stream:
            raise MCPError(types.INTERNAL_ERROR, f"server '{self.name}': its listen stream could not be opened again")
        if on and uri not in session.stream.resources:
            raise MCPError(types.INVALID_PARAMS, f"server '{self.name}' did not agree to send the updates of {uri!r}")

    async def roots_changed(self) -> None:
        """Tell a handshake-era server that roots changed; a 2026-era one has no session to tell, and asks again
        during its next call. A server that does not read its input in time is not waited for."""
        session = self._session
        if session is None or session.client is None or session.lost:
            return
        if self.protocol_version in MODERN_PROTOCOL_VERSIONS:
            return
        with anyio.move_on_after(NOTIFY_TIMEOUT):
            try:
                # Not send_roots_list_changed: it warns on every call that roots are deprecated at 2026-07-28.
                await session.client.session.send_notification(types.RootsListChangedNotification())
            except Exception as e:  # a closing session: the next one lists nothing stale
                logger.bind(server=self.name).debug("server '{}': roots/list_changed not sent: {}", self.name, e)

    # ----- requests (in the caller's task) ------------------------------------------------------

    async def call(
        self,
        tool: str,
        arguments: dict[str, Any],
        timeout: float,
        on_progress: ProgressCallback | None = None,
        caller: Caller | None = None,
    ) -> types.CallToolResult:
        """``on_progress``, when given, asks the upstream for progress reports and gets them; ``caller`` is asked
        what the upstream asks during the call (without it: the unattended answer, no sampling, the config's
        roots)."""
        # Decided before the call: a lost session empties the catalogue.
        retry = self._may_retry(tool)
        display = f"{to_identifier(self.name)}.{to_identifier(tool)}"  # as a snippet writes it
        key = object()
        asker = None if caller is None else _Asker(caller, anyio.current_time() + timeout)
        self._askers[key] = asker
        level = self.log_level()
        meta = None if level is None else cast(types.RequestParamsMeta, {LOG_LEVEL_META_KEY: level})

        async def send(client: Client) -> types.CallToolResult:
            await self._tell_level(client, level)
            return await client.call_tool(
                tool, arguments, read_timeout_seconds=timeout, progress_callback=on_progress, meta=meta
            )

        try:
            return await self.request(display, send, timeout, retry)
        finally:
            del self._askers[key]
            if asker is not None:
                asker.close()

    def log_level(self) -> types.LoggingLevel | None:
        """The most detailed level a listener of the server's log messages wants now; None when nobody listens."""
        return min(self.log_listeners.values(), key=LEVELS.index, default=None)

    async def _tell_level(self, client: Client, level: types.LoggingLevel | None) -> None:
        """Before a call, the level its listeners want, to a handshake-era server that has a level to set (a
        2026-era one reads the call's own opt-in): once per change, within SET_LEVEL_TIMEOUT. While nobody
        listens, the server keeps the last level it was told."""
        session = self._session
        logging = self.capabilities is not None and self.capabilities.logging is not None
        if level is None or session is None or session.log_level == level or not logging:
            return
        if client.protocol_version in MODERN_PROTOCOL_VERSIONS:
            return
        session.log_level = level
        request = types.SetLevelRequest(params=types.SetLevelRequestParams(level=level))
        # Not client.set_logging_level: deprecated at 2026-07-28, it warns on every call.
        with anyio.move_on_after(SET_LEVEL_TIMEOUT):
            try:
                await client.session.send_request(request, types.EmptyResult)
                logger.bind(server=self.name).debug("server '{}': log level set to {}", self.name, level)
            except MCPError as e:
                logger.bind(server=self.name).debug("server '{}': log level not set: {}", self.name, e.message)

    async def request(self, display: str, send: Callable[[Client], Awaitable[T]], timeout: float, retry: bool) -> T:
        """Send one request on the live session; ``display`` names it in errors as the caller wrote it.

        After a lost session it is sent again on the next one only if ``retry`` (it has no side effects).
        """
        if (self._session is None or self._session.lost) and not await self.revive():
            raise self._unavailable(display)
        await self._take_call_slot(display)
        try:
            try:
                return await self._once(display, send, timeout)
            except Lost as lost:
                if not retry or lost.failure.fix is not None:  # a failure with a fix happens again
                    raise _lost(self.name, display, lost) from None
            logger.bind(server=self.name, request=display).info(
                "server '{}': retrying {} (read-only or idempotent) after reconnect", self.name, display
            )
            if not await self.revive():
                raise self._unavailable(display)
            try:
                return await self._once(display, send, timeout)
            except Lost as again:
                raise _lost(self.name, display, again) from None
        finally:
            self._call_slots.release()

    def _unavailable(self, display: str) -> UpstreamUnavailable:
        """Why a request finds no session it could be sent on."""
        if self._stopping:  # its status still says what it was: this connection is being ended for good
            return UpstreamUnavailable(self.name, STOPPING, tool=display, fix=STOPPING_FIX)
        return self.snapshot().unavailable(display)

    async def _take_call_slot(self, display: str) -> None:
        try:
            self._call_slots.acquire_nowait()  # most calls find a slot: no deadline's cancel scope for them
            return
        except anyio.WouldBlock:
            pass
        with anyio.move_on_after(QUEUE_WAIT):
            await self._call_slots.acquire()
            return
        limit = self.config.max_concurrent_calls
        raise UpstreamUnavailable(
            self.name,
            f"busy: {limit} calls to it are in flight (servers.{self.name}.max_concurrent_calls) and none ended "
            f"within {QUEUE_WAIT} s",
            tool=display,
            fix="retry shortly, or make fewer calls to it at once",
        )

    def _may_retry(self, tool: str) -> bool:
        """Only a tool that promises no side effects may run twice."""
        for t in self.tools:
            if t.name == tool and t.annotations is not None:
                return bool(t.annotations.read_only_hint or t.annotations.idempotent_hint)
        return False

    async def _once(self, display: str, send: Callable[[Client], Awaitable[T]], timeout: float) -> T:
        session = self._session
        if session is None or session.client is None or session.lost:
            raise self.snapshot().unavailable(display)
        if session.breaker.open:
            raise UpstreamUnavailable(self.name, session.breaker.describe(), tool=display, retrying=False)
        scope = anyio.CancelScope()
        session.calls.add(scope)
        try:
            with scope:
                result = await send(session.client)
                session.answered()
                return result
        except MCPError as e:
            if e.code == REQUEST_TIMEOUT:
                session.breaker.timed_out()
                raise UpstreamTimeout(self.name, display, timeout) from None
            if e.code == CONNECTION_CLOSED:
                self._lose(session, Failure(e.message))
                raise Lost(session.lost) from None
            session.answered()
            if session.auth is not None and (refused := session.auth.refused_call()) is not None:
                message = f"{display} failed: {refused.reason}; {refused.fix}"
                raise UpstreamError(message, server=self.name, tool=display) from None
            raise UpstreamError(f"{display} failed: {e.message}", server=self.name, tool=display) from None
        except httpx2.TransportError as e:
            self._lose(session, Failure(type(e).__name__, str(e) or None))
            raise Lost(session.lost) from None
        except ValidationError as e:
            session.answered()
            message = f"{display}: server '{self.name}' sent an invalid result: {e}"
            raise UpstreamError(message, server=self.name, tool=display) from None
        finally:
            session.calls.discard(scope)
        # Only reached when _lose cancelled the scope.
        raise Lost(session.lost)


async def _cancel_on(event: anyio.Event, scope: anyio.CancelScope) -> None:
    await event.wait()
    scope.cancel()


class _Asker:
    """A tool call's client as the upstream's requests reach it: one at a time, each answered by the call's
    deadline or given up, and none left waiting once the call has ended (:meth:`close`)."""

    def __init__(self, caller: Caller, deadline: float) -> None:
        self._caller = caller
        self._deadline = deadline
        self._lock = anyio.Lock()
        self._waiting: set[anyio.CancelScope] = set()

    async def ask(self, request: Callable[[Caller], Awaitable[T]], given_up: Callable[[], T]) -> T:
        """``request`` of the caller, or ``given_up()`` once the call's deadline passed or the call ended."""
        with anyio.CancelScope(deadline=self._deadline) as scope:
            self._waiting.add(scope)
            try:
                async with self._lock:
                    return await request(self._caller)
            finally:
                self._waiting.discard(scope)
        return given_up()

    def close(self) -> None:
        for scope in self._waiting:
            scope.cancel()


def _lost(server: str, display: str, lost: Lost) -> UpstreamUnavailable:
    failure = lost_failure(lost.failure)
    return UpstreamUnavailable(server, failure.reason, tool=display, fix=failure.fix)
