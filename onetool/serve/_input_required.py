"""What an upstream asks a 2026-07-28 client during its call: an input-required result, and the same call going on
when the client retries with the answers.

A 2026-era client takes no server-to-client requests. So a tool call of such a client runs in a task the face owns
(:class:`Continuations`), and its ``tools/call`` waits for whichever comes first: the call's result, or a request
of an upstream to the call's client (elicitation, sampling, roots/list; asks.py). The latter answers the
``tools/call`` with an ``InputRequiredResult`` carrying the request and an unguessable ``request_state``; the client
fulfils it and retries ``tools/call`` with ``input_responses`` and that ``request_state``, which hands the answers to
the waiting upstream and waits again, on the same call. The mcp SDK's Client drives this loop by itself.

A gateway that drains counts such a call while it waits for its client too (its first request is counted as every
call's is), takes its client's retries (they continue counted work; serve/_drain.py), and past the drain's deadline
ends it with the drain's error result.

Bounds: at most MAX_WAITING calls wait at once (past it, a 2026-era call runs as before: nobody to ask); a question
waits no longer than the call's deadline (connection.py's asker); a finished call's result is kept RESULT_GRACE
seconds for a client still on its way back, then dropped. A ``request_state`` names one call of one face: another
face, or an unknown or expired one, gets the protocol's invalid-params error.
"""

from __future__ import annotations

import contextlib
import itertools
import secrets
from collections.abc import AsyncIterator
from contextvars import ContextVar
from typing import Any, Final, TypeVar

import anyio
import anyio.abc
from mcp.server import ServerRequestContext
from mcp.server.context import CallNext, HandlerResult
from mcp.shared.exceptions import MCPError
from mcp.types import INVALID_PARAMS, InputRequest, InputRequiredResult
from mcp.types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import BaseModel, ValidationError

from onetool.core.drain import Drain
from onetool.logs import logger
from onetool.serve._drain_guard import carrier_of, stopped

__all__ = ["MAX_WAITING", "RESULT_GRACE", "Continuations", "Waiting", "waiting_call"]

MAX_WAITING: Final = 256
"""Calls of 2026-era clients that may wait for their client's input at once, across a face."""
RESULT_GRACE: Final = 30.0
"""Seconds a finished call's result waits for its client to retry (it was asking that client something)."""
STATE_BYTES: Final = 32
"""Random bytes of a request_state: it is the only thing that names a waiting call."""

R = TypeVar("R", bound=BaseModel)

waiting_call: ContextVar[Waiting | None] = ContextVar("waiting_call", default=None)
"""The waiting call a tool handler runs for, when its client is of the 2026 era (see RequestClient)."""


class _Question:
    def __init__(self, request: InputRequest) -> None:
        self.request = request
        self.answered = anyio.Event()
        self.response: dict[str, Any] | None = None
        self.sent = False


class Waiting:
    """One 2026-era client's tool call, running in the face's task, as it waits for its client's answers."""

    def __init__(self, state: str, ctx: ServerRequestContext[Any, Any]) -> None:
        self.state = state
        self.ctx = ctx
        """The request of the current leg: progress and log messages ride it."""
        self._questions: dict[str, _Question] = {}
        self._keys = itertools.count(1)
        self._changed = anyio.Event()
        self.result: HandlerResult | BaseException | None = None
        self.collected = anyio.Event()
        """Set once its client has the result (or will never get it)."""
        self.scope = anyio.CancelScope()
        """The call's: cancelled when its client gives up on it."""

    async def ask(self, request: InputRequest, answer_type: type[R]) -> R | None:
        """Ask the client ``request`` in the next input-required result, and wait for its answer (cancelled by the
        call's deadline); None when the client's answer is not one."""
        key = f"q{next(self._keys)}"
        question = _Question(request)
        self._questions[key] = question
        self._wake()
        try:
            await question.answered.wait()
        finally:
            del self._questions[key]
        try:
            return answer_type.model_validate(question.response)
        except ValidationError:
            return None

    def finish(self, result: HandlerResult | BaseException) -> None:
        self.result = result
        self._wake()

    def answer(self, responses: dict[str, dict[str, Any]]) -> None:
        """The client's ``input_responses``: each goes to the question it answers; others are ignored."""
        for key, response in responses.items():
            question = self._questions.get(key)
            if question is not None and question.sent and not question.answered.is_set():
                question.response = response
                question.answered.set()

    async def next_leg(self) -> HandlerResult:
        """The call's result, or an input-required result with its questions not yet put to the client."""
        while True:
            if self.result is not None:
                if isinstance(self.result, BaseException):
                    raise self.result
                return self.result
            unsent = {k: q for k, q in self._questions.items() if not q.sent}
            if unsent:
                for question in unsent.values():
                    question.sent = True
                requests = {k: q.request for k, q in unsent.items()}
                return InputRequiredResult(input_requests=requests, request_state=self.state)
            if self._changed.is_set():  # every leg waiting (a client retrying twice) waits on the same event
                self._changed = anyio.Event()
            await self._changed.wait()

    def _wake(self) -> None:
        self._changed.set()


class Continuations:
    """A face's 2026-era tool calls waiting for their client: ``async with running()`` in the face's lifespan, and
    :meth:`middleware` in its chain."""

    def __init__(self, face: str, drain: Drain) -> None:
        self._face = face
        self._drain = drain
        self._waiting: dict[str, Waiting] = {}
        self._tasks: anyio.abc.TaskGroup | None = None

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        async with anyio.create_task_group() as tg:
            self._tasks = tg
            try:
                yield
            finally:
                self._tasks = None
                tg.cancel_scope.cancel()

    async def middleware(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        if ctx.method != "tools/call" or ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
            return await call_next(ctx)
        params = ctx.params or {}
        state = params.get("requestState")
        if state is not None:
            return await self._resume(ctx, state, params.get("inputResponses") or {})
        if self._tasks is None or len(self._waiting) >= MAX_WAITING:
            return await call_next(ctx)  # nobody to ask: the call runs as a 2026-era call always did
        waiting = Waiting(secrets.token_urlsafe(STATE_BYTES), ctx)
        self._waiting[waiting.state] = waiting
        self._tasks.start_soon(self._run, waiting, call_next, ctx)
        return await self._leg(waiting)

    async def _resume(self, ctx: ServerRequestContext[Any, Any], state: Any, responses: Any) -> HandlerResult:
        waiting = self._waiting.get(state) if isinstance(state, str) else None
        if waiting is None or not isinstance(responses, dict):
            raise MCPError(
                INVALID_PARAMS,
                "requestState names no call waiting for input here: it ended, or its answers came too late; call the "
                "tool again",
            )
        waiting.ctx = ctx
        waiting.answer(_parsed(responses))
        return await self._leg(waiting)

    async def _leg(self, waiting: Waiting) -> HandlerResult:
        try:
            result = await waiting.next_leg()
        except anyio.get_cancelled_exc_class():
            # The client cancelled its request or went away: the call is cancelled, as a call in its own request
            # would have been (its upstream calls get notifications/cancelled).
            waiting.scope.cancel()
            self._waiting.pop(waiting.state, None)
            waiting.collected.set()
            self._drain.release(waiting, None)
            raise
        if isinstance(result, InputRequiredResult):
            # Between two of its client's requests the call is counted here; during its first, the request is.
            self._drain.hold(waiting, waiting.scope)
        else:
            self._waiting.pop(waiting.state, None)
            waiting.collected.set()
            self._drain.release(waiting, carrier_of(waiting.ctx))  # counted until this answer is written
        return result

    async def _run(self, waiting: Waiting, call_next: CallNext, ctx: ServerRequestContext[Any, Any]) -> None:
        token = waiting_call.set(waiting)
        try:
            with waiting.scope:
                waiting.finish(await call_next(ctx))
            if waiting.result is None:  # stopped: past the drain's deadline (or its client gave up on it)
                waiting.finish(stopped(self._drain))
        except Exception as e:  # the handler's own error: its client gets it as it would have
            waiting.finish(e)
        finally:
            waiting_call.reset(token)
        # A client that was asked something may still be on its way back for this result.
        with anyio.move_on_after(RESULT_GRACE):
            await waiting.collected.wait()
        self._drain.release(waiting, None)
        if self._waiting.pop(waiting.state, None) is not None:
            logger.bind(face=self._face).info("a 2026-era client never came back for its call's result")


def _parsed(responses: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The client's answers, as plain data (each is validated against what its question expects)."""
    return {str(k): v for k, v in responses.items() if isinstance(v, dict)}
