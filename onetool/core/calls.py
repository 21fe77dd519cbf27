"""The one path of a tool call, whatever face asked for it.

A face names a tool its own way (``pack.tool`` in a snippet; ``server`` and ``tool`` in ``exec``; ``server:tool``
on /mcp/direct) and hands :meth:`Calls.find` a lookup of that name in the registry. From there every call takes
the same steps:

1. Find: the lookup in the current registry, which holds only what faces may see (a quarantined server, a
   disabled one's tools, held or denied tools are not in it). A miss on a server still making its first
   connection attempt waits for it, up to its connect timeout; a server found disconnected gets one immediate
   reconnect attempt, shared with every call that asks meanwhile. A call still refused gets its FAILED
   ``proxy.tool.call`` record here (it never reaches the pool, which writes the record of every other call).
2. Arguments: checked against the tool's input schema, or a local function's annotations, before anything
   leaves the gateway.
3. Call: an upstream tool through the pool (the server's timeout, ``notifications/cancelled`` on cancel,
   progress relayed); a local function in the gateway. A local pack's own bug is reported, not raised.
4. Shape: the plain value (:meth:`Calls.value`: what a snippet gets) or the upstream's own result
   (:meth:`Calls.result`), which a face renders its way (``exec``: TOON, /mcp/direct: untouched) with
   :func:`shaped`, off the event loop when it is large.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractAsyncContextManager, suppress
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, TypeVar

import anyio
import anyio.to_thread
from anyio.abc import ObjectReceiveStream
from mcp import types

from onetool import metrics
from onetool.errors import ModelError, ToolFailed, UnknownPack, UnknownTool, UpstreamError, UpstreamUnavailable
from onetool.logs import LogSpan, logger
from onetool.registry import LocalTool, Registry, Tool, UpstreamTool
from onetool.registry.schema import ArgumentCap, CheckBudget, count_nodes
from onetool.search import ToolIndex
from onetool.upstream import ServerState
from onetool.upstream.asks import Asks, SamplingLimits

if TYPE_CHECKING:
    from onetool.config import Config
    from onetool.config.served import Served
    from onetool.upstream import UpstreamPool
    from onetool.upstream.asks import Caller
    from onetool.upstream.connection import ProgressCallback

__all__ = ["OFF_LOOP_FROM", "REGISTRY_CATCH_UP", "Calls", "PackContext", "shaped", "value_size"]

OFF_LOOP_FROM = 64 * 1024
"""Characters of text, or JSON values, from which a result is shaped off the event loop, so one big result does
not hold up every other client; the sandbox charges decoding to a run's memory from the same size."""
REGISTRY_CATCH_UP = 2.0
"""Seconds a call waits, after its server reconnected, for the registry to show the server's tools again."""

T = TypeVar("T")
Lookup = Callable[[Registry], T]
"""A face's name for a tool, looked up in one registry snapshot: the tool, or a ModelError saying what exists."""
Changes = Callable[[], AbstractAsyncContextManager[ObjectReceiveStream[None]]]


@dataclass
class Calls:
    """The call path over the gateway's shared services: built once by the gateway, used by every face."""

    served: Served
    """The config the gateway serves now (a reload swaps it)."""
    pool: UpstreamPool
    current: Callable[[], Registry]
    """The live registry: an immutable snapshot, replaced whenever what faces may see changes."""
    changes: Changes
    """Subscribe to the gateway's change cues: one item whenever the registry was replaced."""
    connect_timeout: Callable[[str], float | None]
    """A server's connect timeout; None for a server that is not (or no longer) configured."""
    index: ToolIndex
    """The live registry's tools by what they do: what ``proxy.search`` asks."""
    _context: PackContext | None = field(default=None, init=False, repr=False)

    @property
    def registry(self) -> Registry:
        return self.current()

    @property
    def config(self) -> Config:
        return self.served.config

    @property
    def context(self) -> PackContext:
        """What a local pack function that declares ``ctx`` gets: made again only when a reload changed the
        config."""
        if self._context is None or self._context.config is not self.config:
            self._context = PackContext(
                config=self.config, pool=self.pool, registry=self.current, calls=self, index=self.index
            )
        return self._context

    def asks(self, caller: Caller) -> Asks:
        """``caller`` as the upstreams of one run (or one direct or exec call) may ask it: with the run's share of
        sampling (``sampling:``)."""
        limits = self.config.sampling
        return Asks(caller, SamplingLimits(limits.max_requests, limits.max_tokens))

    async def find(self, lookup: Lookup[T], *, server: str | None, tool: str) -> T:
        """``lookup`` in the current registry, for a call to ``tool`` of ``server`` (None: the name points at no
        configured server). Raises what the lookup raises, a ModelError for the model."""
        try:
            return await self._find(lookup, server)
        except UpstreamUnavailable as e:
            with LogSpan("proxy.tool.call", server=e.server, tool=tool, resultLength=0) as span:
                span.add(status="FAILED", errorType=type(e).__name__, errorMessage=str(e))
            metrics.observe_call(span.fields, *self.pool.metric_labels(e.server, tool))
            raise

    async def _find(self, lookup: Lookup[T], server: str | None) -> T:
        waited = revived = False
        while True:
            try:
                return lookup(self.registry)
            except (UnknownPack, UnknownTool, UpstreamUnavailable) as miss:
                if server is not None and not waited:
                    waited = True
                    if await self.settled(server):
                        continue  # it connected or failed meanwhile: look again
                if isinstance(miss, UpstreamUnavailable) and not revived:
                    revived = True
                    await self._revive(miss)
                    continue
                raise

    async def value(
        self,
        target: Tool,
        args: list[Any],
        kwargs: dict[str, Any],
        *,
        label: str | None = None,
        on_progress: ProgressCallback | None = None,
        caller: Caller | None = None,
        budget: CheckBudget | None = None,
    ) -> Any:
        """Call ``target`` with a snippet's arguments: its plain JSON-able value, or a ModelError (an upstream's
        ``isError`` result is a ToolFailed). ``label`` names the call in argument errors (default: the tool's
        signature); ``budget`` is what the gateway may still check of the run's arguments (see :meth:`result`)."""
        if isinstance(target, UpstreamTool):
            result = await self.result(
                target, args, kwargs, label=label, on_progress=on_progress, caller=caller, budget=budget
            )
            return target.value(result)
        if not isinstance(target, LocalTool):
            raise TypeError(f"not a tool the gateway can call: {target!r}")
        context = self.context
        if caller is not None or budget is not None:
            context = replace(context, caller=caller, budget=budget)
        try:
            return await target.call(args, kwargs, context)
        except ModelError:
            raise
        except Exception as e:  # a local pack's own bug: report it, keep the host's traceback out of the model
            logger.opt(exception=True).warning("local pack {}.{} raised", target.pack, target.name)
            raise ToolFailed(f"{target.pack}.{target.name} raised {type(e).__name__}: {e}") from None

    async def result(
        self,
        target: UpstreamTool,
        args: list[Any],
        kwargs: dict[str, Any],
        *,
        label: str | None = None,
        on_progress: ProgressCallback | None = None,
        caller: Caller | None = None,
        budget: CheckBudget | None = None,
    ) -> types.CallToolResult:
        """Call the upstream tool ``target``: its result as the upstream sent it (``isError`` included).

        Its arguments are checked against the tool's schema before anything is sent, within bounds (the server's
        ``max_argument_mb``, a cap of values per call, and the run's ``budget`` when the call is part of a run):
        what cannot be checked within them is refused with an ArgumentError saying which bound."""
        label = label or target.signature
        max_bytes = self.pool.max_argument_bytes(target.server)
        cap = None if max_bytes is None else ArgumentCap(max_bytes, f"servers.{target.server}.max_argument_mb")
        bound = await target.schema.bind(label, args, kwargs, cap=cap, budget=budget)
        try:
            return await self.pool.call(
                target.server, target.remote_name, bound, on_progress=on_progress, caller=caller
            )
        except ModelError:
            raise
        except Exception as e:  # a failure of no kind the pool knows: its traceback is on the call's log record
            message = f"{label} failed inside the gateway ({type(e).__name__}); its log has the details"
            raise UpstreamError(message, server=target.server, tool=target.remote_name, origin="host") from None

    async def settled(self, server: str) -> bool:
        """Whether ``server`` was still making its first connection attempt; if so, return once the registry no
        longer shows it connecting (it connected or failed once), or after its connect timeout."""
        if not self._connecting(server):
            return False
        timeout = self.connect_timeout(server)
        if timeout is None:
            return False  # removed meanwhile: the lookup says so
        with anyio.move_on_after(timeout):
            async with self.changes() as changes:
                # Checked again once subscribed: a change in between would otherwise go unnoticed.
                if self._connecting(server):
                    async for _ in changes:
                        if not self._connecting(server):
                            break
        return True

    async def _revive(self, refused: UpstreamUnavailable) -> None:
        """One shared reconnect attempt for the server that ``refused`` names (re-raised if it fails), then a
        short wait for the registry to show its tools again."""
        async with self.changes() as changes:
            if not await self.pool.revive(refused.server):
                raise refused
            with anyio.move_on_after(REGISTRY_CATCH_UP), suppress(anyio.EndOfStream):
                while not self._shows(refused.server):
                    await changes.receive()

    def _connecting(self, server: str) -> bool:
        status = self.registry.server_status(server)
        return status is not None and status.status is ServerState.CONNECTING

    def _shows(self, server: str) -> bool:
        status = self.registry.server_status(server)
        return status is not None and status.connected


@dataclass(frozen=True)
class PackContext:
    """Given to a local pack function that declares a ``ctx`` parameter.

    Local packs are trusted host code: they may reach the config (and its secrets), the upstream pool, the
    current registry and its search index, and the call path itself, to call other tools as a snippet's call would.
    """

    config: Config
    pool: UpstreamPool
    registry: Callable[[], Registry]
    calls: Calls
    index: ToolIndex
    """The registry's tools by what they do (it follows the live registry)."""
    caller: Caller | None = None
    """Who answers what an upstream asks during this call (asks.py): the client of the run it is part of, to
    pass on to the calls the pack makes for it (``proxy.call`` does); None: nobody is there to ask."""
    budget: CheckBudget | None = None
    """What the gateway may still check of the arguments of the run this call is part of, to pass on to the
    calls the pack makes for it (``proxy.call`` does); None: the call is no run's."""


async def shaped(shape: Callable[[T], types.CallToolResult], value: T, size: int) -> types.CallToolResult:
    """``shape(value)``, in a worker thread when ``size`` (see :func:`value_size`) is past OFF_LOOP_FROM. The
    thread's work is bounded by the result's size, which the face's ``max_chars`` and the pool bound."""
    if size <= OFF_LOOP_FROM:
        return shape(value)
    return await anyio.to_thread.run_sync(shape, value)


def value_size(value: Any) -> int:
    """The size of a value or an upstream result for :func:`shaped`: characters of text plus JSON values,
    counted no further than just past OFF_LOOP_FROM."""
    if isinstance(value, types.CallToolResult):
        texts = sum(len(c.text) for c in value.content if isinstance(c, types.TextContent))
        return texts + (value_size(value.structured_content) if value.structured_content is not None else 0)
    return count_nodes(value, OFF_LOOP_FROM)
