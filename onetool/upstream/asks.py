"""What an upstream may ask the client of one of its tool calls: a question for its user (elicitation, shown as
elicit.py says), a completion from its model (``sampling/createMessage``) and its roots (``roots/list``).

A call's client (:class:`Caller`) is the MCP client whose request made the call: a run's, a direct tool's, an
exec's. Connection routes each such request to it under one rule (the call must be the server's only tool call in
flight); this module says what may pass. Sampling spends the client's model, so each run (or direct or exec call)
gets a bounded share (:class:`Asks`, ``sampling:`` in the config): past it, and wherever the client cannot sample,
the upstream gets the protocol's own error at once (:class:`Refused`). None of it reaches a snippet or a model's
context through the gateway.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Protocol

import mcp.types as types

from onetool.text import shown_name
from onetool.upstream.elicit import quoted

__all__ = ["SAMPLED_BY", "Asks", "Caller", "Refused", "SampleResult", "SamplingLimits", "attributed_sampling"]

SampleResult = types.CreateMessageResult | types.CreateMessageResultWithTools

SAMPLED_BY: Final = (
    "[OneTool] MCP server '{}' asks for this completion (the messages, and its instructions quoted below, are its own;"
    " OneTool does not vouch for them)"
)
"""The first line of the system prompt of every sampling request an upstream makes through the gateway: the user
who approves it, and the model, know which server asks."""
QUESTIONS_PER_RUN: Final = 20
"""Questions (elicitations) one run may put to its client's user; past them an upstream's question gets the
unattended answer: a server asking again and again cannot keep a person busy."""
REFUSED_CODE: Final = types.INVALID_REQUEST
"""The error code an upstream's refused request gets: what a client without the capability answers (the SDK's own
default callbacks do)."""


def attributed_sampling(server: str, params: types.CreateMessageRequestParams) -> types.CreateMessageRequestParams:
    """``params`` as the gateway passes them on: :data:`SAMPLED_BY` with ``server`` (its configured name) first in
    the system prompt, the upstream's own system prompt quoted below it (elicit.py's :func:`quoted`)."""
    lines = [SAMPLED_BY.format(shown_name(server))]
    if params.system_prompt:
        lines.append(quoted(params.system_prompt))
    return params.model_copy(update={"system_prompt": "\n".join(lines)})


class Caller(Protocol):
    """The client of a tool call, as the upstream's requests during it reach that client. Each method answers None
    when this client cannot be asked (no such capability, no back-channel)."""

    async def elicit(self, params: types.ElicitRequestParams) -> types.ElicitResult | None: ...

    async def sample(self, params: types.CreateMessageRequestParams) -> SampleResult | None: ...

    async def list_roots(self) -> types.ListRootsResult | None: ...


class Refused(Exception):
    """An upstream's request that may not pass; the message says why (it goes to the upstream and the log)."""

    def __init__(self, why: str, *, code: int = REFUSED_CODE) -> None:
        super().__init__(why)
        self.code = code

    def error(self) -> types.ErrorData:
        return types.ErrorData(code=self.code, message=str(self))


@dataclass(frozen=True)
class SamplingLimits:
    """What one run (or direct or exec call) may spend of its client's model for the upstreams it calls."""

    requests: int
    tokens: int


class Asks:
    """A :class:`Caller` with the sampling its run may still ask for: :attr:`SamplingLimits.requests` requests and
    :attr:`SamplingLimits.tokens` tokens (the ``max_tokens`` the upstreams asked for, summed) in all, and
    QUESTIONS_PER_RUN questions. Built once per run, so every call of the run draws on the same share."""

    def __init__(self, caller: Caller, limits: SamplingLimits) -> None:
        self._caller = caller
        self._limits = limits
        self._requests = 0
        self._tokens = 0
        self._questions = 0

    async def elicit(self, params: types.ElicitRequestParams) -> types.ElicitResult | None:
        """The user's answer; Refused past the run's questions."""
        if self._questions >= QUESTIONS_PER_RUN:
            raise Refused(f"this run's questions are spent ({QUESTIONS_PER_RUN} per run)")
        self._questions += 1
        return await self._caller.elicit(params)

    async def list_roots(self) -> types.ListRootsResult | None:
        return await self._caller.list_roots()

    async def sample(self, params: types.CreateMessageRequestParams) -> SampleResult | None:
        """The client's completion; Refused past the run's share (counted before asking: a request the client then
        fails still spent its turn, so a flood stays bounded)."""
        limits = self._limits
        if self._requests >= limits.requests:
            raise Refused(f"this run's sampling requests are spent ({limits.requests}, sampling.max_requests)")
        if self._tokens + params.max_tokens > limits.tokens:
            left = limits.tokens - self._tokens
            raise Refused(
                f"max_tokens {params.max_tokens} is more than this run has left ({left} of {limits.tokens},"
                " sampling.max_tokens)"
            )
        self._requests += 1
        self._tokens += params.max_tokens
        return await self._caller.sample(params)
