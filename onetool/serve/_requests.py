"""What every MCP face shares about one request: the client of a tool call, as the gateway tells it the call's
progress and upstream log messages (:class:`RequestClient`), the log level each connection asked for
(:class:`LogLevels`), an error result, and the connection behind a request (:func:`connection_of`).

Progress goes to a client whose request carried a progress token. Log messages go as ``notifications/message``
at the level the client asked for: a handshake-era client with ``logging/setLevel`` (default: warning), a
2026-era client with the ``io.modelcontextprotocol/logLevel`` key of the request's ``_meta`` (default, as that
era's spec says: none). Both ride the call's own request, and so do an upstream's requests to the client
(elicitation, sampling, roots/list), relayed as the upstream sent them to a handshake-era client that declared the
capability (for an elicitation, for its mode).
"""

from __future__ import annotations

from typing import Any, Final, TypeVar

from mcp.server import Server, ServerRequestContext
from mcp.server.connection import Connection
from mcp.server.session import ServerSession
from mcp.server.validation import wants_sampling_tools
from mcp.shared.exceptions import MCPError, NoBackChannelError
from mcp.shared.jsonrpc_dispatcher import progress_token_from_params
from mcp.shared.message import ServerMessageMetadata
from mcp.types import (
    INVALID_PARAMS,
    LOG_LEVEL_META_KEY,
    CreateMessageRequest,
    CreateMessageRequestParams,
    CreateMessageResult,
    CreateMessageResultWithTools,
    ElicitRequest,
    ElicitRequestParams,
    ElicitResult,
    EmptyResult,
    InputRequest,
    ListRootsRequest,
    ListRootsResult,
    LoggingLevel,
    LoggingMessageNotification,
    LoggingMessageNotificationParams,
    SetLevelRequestParams,
)
from mcp.types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import BaseModel

from onetool.serve._input_required import waiting_call
from onetool.upstream.asks import Refused, SampleResult
from onetool.upstream.connection import LEVELS

DEFAULT_LOG_LEVEL: Final[LoggingLevel] = "warning"
"""Upstream log messages a handshake-era client gets before it sends logging/setLevel."""
R = TypeVar("R", bound=BaseModel)


class RequestClient:
    """The client of one tool call, as the gateway tells it the call's progress and upstream logs (a RunClient)."""

    def __init__(self, ctx: ServerRequestContext[Any, Any], level: LoggingLevel | None) -> None:
        self._first = ctx
        self._waiting = waiting_call.get()  # a 2026-era client's call: what it is asked rides input-required results
        self._level = level
        self.wants_progress = progress_token_from_params(ctx.params) is not None

    @property
    def _ctx(self) -> ServerRequestContext[Any, Any]:
        """The request notifications ride: a waiting call's latest retry, else the call's own."""
        return self._first if self._waiting is None else self._waiting.ctx

    def wants_log(self, level: LoggingLevel) -> bool:
        return self._level is not None and LEVELS.index(level) >= LEVELS.index(self._level)

    async def progress(self, progress: float, total: float | None, message: str | None) -> None:
        await self._ctx.session.report_progress(progress, total, message)

    async def log(self, level: LoggingLevel, logger_name: str, text: str) -> None:
        # Not send_log_message: it is deprecated (logging is, at 2026-07-28) and warns on every call; the
        # level check it would add is wants_log's, already done.
        params = LoggingMessageNotificationParams(level=level, logger=logger_name, data=text)
        await self._ctx.session.send_notification(
            LoggingMessageNotification(params=params), related_request_id=self._ctx.request_id
        )

    async def elicit(self, params: ElicitRequestParams) -> ElicitResult | None:
        declared = self._ctx.session.client_capabilities
        able = declared.elicitation if declared is not None else None
        # An empty elicitation capability means form mode (as it did before URL mode existed).
        if able is None or (able.url is None if params.mode == "url" else able.form is None and able.url is not None):
            return None
        try:
            return await self._request(ElicitRequest(params=params), ElicitResult)
        except NoBackChannelError:  # a 2026-era client: no server-to-client requests
            return None
        except MCPError:  # the client failed to ask; its user made no choice
            return ElicitResult(action="cancel")

    async def sample(self, params: CreateMessageRequestParams) -> SampleResult | None:
        declared = self._ctx.session.client_capabilities
        if declared is None or declared.sampling is None:
            return None
        with_tools = wants_sampling_tools(params.tools, params.tool_choice)
        if with_tools and declared.sampling.tools is None:
            raise Refused("the client of this call cannot sample with tools (it did not declare sampling.tools)")
        request = CreateMessageRequest(params=params)
        try:
            if with_tools:
                return await self._request(request, CreateMessageResultWithTools)
            return await self._request(request, CreateMessageResult)
        except NoBackChannelError:
            return None
        except MCPError as e:  # the client (or its user) refused: the upstream hears it as the client said it
            raise Refused(f"the client of this call answered: {e.message}", code=e.code) from None

    async def list_roots(self) -> ListRootsResult | None:
        declared = self._ctx.session.client_capabilities
        if declared is None or declared.roots is None:
            return None
        try:
            return await self._request(ListRootsRequest(), ListRootsResult)
        except (NoBackChannelError, MCPError):  # no roots to give: the upstream gets the config's
            return None

    async def _request(self, request: InputRequest, result_type: type[R]) -> R:
        """``request`` to the client: in an input-required result for a waiting 2026-era call, else on the stream
        of the call it is part of."""
        if self._waiting is not None:
            answer = await self._waiting.ask(request, result_type)
            if answer is None:
                raise MCPError(INVALID_PARAMS, f"the client's answer to {request.method} is not one")
            return answer
        metadata = ServerMessageMetadata(related_request_id=self._ctx.request_id)
        return await self._ctx.session.send_request(request, result_type, metadata=metadata)


class LogLevels:
    """The log level each handshake-era connection set with logging/setLevel, for a face's server."""

    def __init__(self) -> None:
        self._levels: dict[int, LoggingLevel] = {}

    def install(self, server: Server[Any]) -> None:
        """Answer ``server``'s logging/setLevel requests."""
        # Registered this way, not as on_set_logging_level=..., which warns that logging is deprecated at
        # 2026-07-28; handshake-era clients still set their level with it.
        server.add_request_handler("logging/setLevel", SetLevelRequestParams, self.set_level)

    async def set_level(self, ctx: ServerRequestContext[Any, Any], params: SetLevelRequestParams) -> EmptyResult:
        connection = connection_of(ctx.session)
        key = id(connection)
        if key not in self._levels:
            connection.exit_stack.callback(self._levels.pop, key, None)
        self._levels[key] = params.level
        return EmptyResult()

    def client(self, ctx: ServerRequestContext[Any, Any]) -> RequestClient:
        """The client of the call ``ctx`` carries."""
        return RequestClient(ctx, self.level_for(ctx))

    def level_for(self, ctx: ServerRequestContext[Any, Any]) -> LoggingLevel | None:
        if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
            requested = (ctx.meta or {}).get(LOG_LEVEL_META_KEY)
            return requested if requested in LEVELS else None
        return self._levels.get(id(connection_of(ctx.session)), DEFAULT_LOG_LEVEL)


def connection_of(session: ServerSession) -> Connection:
    """The connection behind a lowlevel handler's session. SDK-PRIVATE HOOK (mcp 2.3), the only one here.

    A lowlevel ``ServerRequestContext`` carries a per-request ``ServerSession`` and no public handle on
    its ``Connection``, yet the connection's (public) ``exit_stack`` is the one way to learn that a
    handshake-era client has gone (EOF, DELETE, idle timeout). tests/serve/test_fanout.py fails when
    the SDK stops carrying the connection here.
    """
    connection = getattr(session, "_connection", None)
    if not isinstance(connection, Connection):
        raise RuntimeError(
            "the mcp SDK no longer exposes ServerSession._connection; update onetool.serve._requests.connection_of"
        )
    return connection
