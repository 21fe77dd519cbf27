"""A ``run``: one snippet, pre-checked, run in the sandbox, its pack calls made through :mod:`onetool.core.calls`, its
outcome shaped as ``run``'s MCP result. Every face that offers ``run`` (``/mcp``, stdio, /mcp/direct, ``POST
/admin/run``, ``onetool run``) runs snippets here.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import anyio.lowlevel
from anyio.abc import TaskGroup
from mcp import types

from onetool import metrics
from onetool.core.calls import OFF_LOOP_FROM, Calls
from onetool.core.precheck import check_sites, too_long
from onetool.core.relay import Relay, RunClient, relayed
from onetool.errors import ModelError, Verdict
from onetool.logs import LogSpan, logger
from onetool.logs.runs import RunLog, RunRecord
from onetool.registry import Registry, Tool, UpstreamTool
from onetool.registry.results import error_span_fields, returned_media, run_result
from onetool.registry.schema import CheckBudget
from onetool.upstream.asks import Caller
from sandbox import Limits, RunResult, Sandbox

__all__ = ["Runs"]


@dataclass
class Runs:
    """Runs snippets on the gateway's sandbox; ``tasks`` (the gateway's) owns the tasks that send a run's reports."""

    calls: Calls
    sandbox: Sandbox
    tasks: TaskGroup
    journal: RunLog = field(default_factory=RunLog)
    """The recent runs, for the operator's console."""

    @property
    def limits(self) -> Limits:
        """Each run's, as the config served now sets them: a reload's apply to the next run."""
        return self.calls.served.limits

    async def run(self, code: str, client: RunClient | None = None, *, face: str = "run") -> types.CallToolResult:
        """Run one snippet; never raises for anything the snippet or an upstream does.

        ``client``, the MCP client that asked, gets the run's progress and its upstreams' log messages as
        they happen, as far as it asked for them. ``face`` names who asked, in the run's log record, metrics and
        the console's list of runs.
        """
        run_id = uuid.uuid4().hex[:12]
        span = LogSpan("run", codeLength=len(code), face=face)
        started = False
        try:
            with logger.contextualize(runId=run_id), span:
                failure = too_long(code)
                if failure is not None:
                    span.add(calls=0, status="FAILED", **error_span_fields(failure))
                    return run_result(None, "", error=failure, max_chars=self.limits.max_output)
                started = True
                return await self._run(code, client, span)
        finally:  # also for a run its client cancelled: it ran, and counts
            metrics.observe_run(face, span.fields, started=started)
            shown = code if self.calls.config.ui.show_code else None
            self.journal.add(RunRecord.of(run_id, face, span.fields, shown))

    async def _run(self, code: str, client: RunClient | None, span: LogSpan) -> types.CallToolResult:
        registry = self.calls.registry
        media: set[str] = set()
        async with relayed(client, self.calls.pool, self.tasks) as relay:
            outcome = await self._sandboxed(code, registry, media, relay, client)
        span.add(calls=outcome.calls)
        if outcome.error is not None:
            span.add(status="FAILED", **error_span_fields(outcome.error))
        if outcome.size >= OFF_LOOP_FROM:  # decoding it took the loop a while: other clients first
            await anyio.lowlevel.checkpoint()
        return run_result(
            outcome.value,
            outcome.output,
            error=outcome.error,
            max_chars=self.limits.max_output,
            media_keys=media,
            head=outcome.head,
        )

    async def _sandboxed(
        self, code: str, registry: Registry, media: set[str], relay: Relay | None, client: RunClient | None
    ) -> RunResult:
        try:
            return await self.sandbox.run(
                code,
                packs=registry.tool_names,
                limits=self.limits,
                # What an upstream asks during a call goes to the run's client, never to the snippet.
                on_call=partial(
                    self._on_call, media, relay, None if client is None else self.calls.asks(client), CheckBudget()
                ),
                on_progress=None if relay is None else relay.snippet_progress,
                on_sites=partial(check_sites, registry=registry, code=code),
            )
        except Exception as e:  # the sandbox promises not to raise; if it does, the gateway must not fall over
            logger.exception("sandbox failed")
            return RunResult(None, "", Verdict.INTERNAL.error(f"the sandbox failed: {type(e).__name__}"), 0, 0)

    async def _on_call(
        self,
        media: set[str],
        relay: Relay | None,
        caller: Caller | None,
        budget: CheckBudget,
        pack: str,
        tool: str,
        args: list[Any],
        kwargs: dict[str, Any],
    ) -> Any:
        """A pack call from the sandbox; what it raises becomes a ToolError (of its kind) inside the snippet, naming
        the call's server (None for a local tool) and tool and whose failure it was."""
        calls = self.calls
        found = calls.registry.packs.get(pack)
        server = found.server if found is not None else None
        try:
            target: Tool = await calls.find(lambda registry: registry.resolve(pack, tool), server=server, tool=tool)
            server = target.server if isinstance(target, UpstreamTool) else None
            progress = None
            if isinstance(target, UpstreamTool) and relay is not None:
                relay.follow(target.server)
                progress = relay.upstream_progress(f"{pack}.{tool}")
            value = await calls.value(target, args, kwargs, on_progress=progress, caller=caller, budget=budget)
        except ModelError as e:
            raise e.snippet_type(str(e), server=e.server or server, tool=tool, origin=e.origin) from None
        media.update(returned_media(value))
        return value
