"""The host's half of one run: send the job, answer the worker's pack calls, read how the run ended.

The worker is treated as hostile: its frames are decoded by sandbox/host/_untrusted.py (a large one only once
the run has reserved the memory its objects may take from the host's budget, sandbox/host/budget.py) and
checked once by sandbox/protocol/messages.py; the calls it may have waiting and the bytes the host holds for
them are capped, and a run past a cap ends with a LimitError. Its progress reports are passed on at most
PROGRESS_RATE a second; a worker that keeps sending far more is not a snippet. While every call the worker
made waits for its reply, the run lends its CPU slot to other runs (sandbox/host/_slots.py).
"""

from __future__ import annotations

import contextlib
import signal
from typing import overload

import anyio
import anyio.lowlevel
from anyio.abc import TaskGroup

from sandbox.host._slots import Seat
from sandbox.host._untrusted import decode_untrusted
from sandbox.host.budget import RESERVED_FROM, HostMemory, decoded_size
from sandbox.host.forkserver import GONE, Worker
from sandbox.protocol.api import Limits, OnCall, OnProgress, OnSites, RunError, RunResult
from sandbox.protocol.caps import MAX_IN_FLIGHT, PROGRESS_RATE
from sandbox.protocol.channel import ProtocolError
from sandbox.protocol.errors import TOOL_ERRORS, ToolError
from sandbox.protocol.messages import (
    REPLY_ENVELOPE,
    Call,
    Done,
    Progress,
    Ration,
    SentErrors,
    Sites,
    parse,
    reply_frame,
)
from sandbox.protocol.verdicts import Verdict

__all__ = ["C_STACK_OVERFLOW", "MAX_IN_FLIGHT", "PROGRESS_FLOOD", "PROGRESS_RATE", "Run"]

PROGRESS_FLOOD = 1000
"""Dropped progress reports that end the run: progress() itself never sends faster than PROGRESS_RATE."""
HELD_MESSAGES = 4
"""The bytes of calls waiting and of replies not yet taken by the worker are capped at this many full
messages (sandbox.max_message): one call with its reply fits twice over."""
_MB = 1024 * 1024
C_STACK_OVERFLOW = (
    "the code nested data too deeply and overflowed the worker's C stack (it died with SIGSEGV); nest less"
)
"""The message of a worker's SIGSEGV: the snippet's own RecursionError."""


class Run:
    """The host's half of one run: answer pack calls in child tasks until the worker reports, dies or times out."""

    def __init__(
        self,
        worker: Worker,
        limits: Limits,
        on_call: OnCall,
        on_progress: OnProgress | None = None,
        on_sites: OnSites | None = None,
        memory: HostMemory | None = None,
        *,
        seat: Seat,
    ) -> None:
        self.worker = worker
        self._seat = seat
        self.limits = limits
        self.on_call = on_call
        self.on_progress = on_progress
        self.on_sites = on_sites
        self._sites_seen = False
        self._memory = memory
        self._reserved = 0
        """Bytes this run holds of the host's memory budget; all of it is given back when the run ends."""
        self._waiting_for_memory = False
        self.calls = 0
        self.finished = False
        """The worker reported how the run ended and now only waits to be killed."""
        self._in_flight = 0
        self._unanswered = 0
        """Calls whose reply is not ready: while there are any, the worker only waits, and the run lends its CPU
        slot to other runs (sandbox/host/_slots.py)."""
        self._ids: set[int] = set()
        """Ids of the calls waiting for replies: the worker matches replies by id, so none may be reused."""
        self._progress_ration = Ration(PROGRESS_RATE)
        self._progress_dropped = 0
        self._held = 0
        self._max_held = HELD_MESSAGES * (limits.max_message + REPLY_ENVELOPE)
        self._answering: TaskGroup | None = None
        self._overflow: RunResult | None = None
        """Set by a reply that took the held bytes past their cap; the run ends with it."""
        self._sent = SentErrors(limits)
        """The errors this run's replies carried: a Done that reports one of them is a tool error."""

    async def drive(self, job: bytes) -> RunResult:
        """`job` is the encoded job frame."""
        result: RunResult | None = None
        try:
            with anyio.move_on_after(self.limits.timeout):
                # Most runs make no pack call: the task group that answers calls starts with the first one.
                first = await self._serve(job, None)
                if isinstance(first, RunResult):
                    result = first
                else:
                    async with anyio.create_task_group() as task_group:
                        self._answering = task_group
                        task_group.start_soon(self._answer, *first)
                        result = await self._serve(None, task_group)
                        if self._in_flight:  # cancelling costs tens of microseconds (anyio formats a reason)
                            task_group.cancel_scope.cancel()
        finally:
            self._release(self._reserved)
        if self._overflow is not None:
            return self._overflow
        if result is None and self._waiting_for_memory:
            assert self._memory is not None
            return self._failed(
                Verdict.LIMIT,
                f"the run's data waited until its time limit for gateway memory: other runs held all "
                f"{self._memory.limit // _MB} MB of sandbox.max_host_memory_mb; try again, or move less data",
            )
        if result is None:  # the caller discards the worker
            timeout = float(self.limits.timeout)
            return self._failed(Verdict.TIMEOUT, f"run exceeded the {timeout} s time limit (sandbox.timeout)")
        return result

    @overload
    async def _serve(self, job: bytes | None, task_group: TaskGroup) -> RunResult: ...

    @overload
    async def _serve(self, job: bytes | None, task_group: None) -> RunResult | tuple[Call, int, int]: ...

    async def _serve(self, job: bytes | None, task_group: TaskGroup | None) -> RunResult | tuple[Call, int, int]:
        """Send `job` if given, then read until the end; without a task group, a pack call within the
        caps is returned with its frame size and reservation, for the caller to answer once it has one."""
        cap = self.limits.max_message + REPLY_ENVELOPE
        try:
            if job is not None:
                await self.worker.channel.send_frame(job)
            while True:
                body = await self.worker.channel.receive_frame(cap)
                reserved = await self._reserve(body)
                if isinstance(reserved, RunResult):
                    return reserved
                message = parse(decode_untrusted(body), self.limits)
                if reserved:  # a large frame took the loop for a while: let other clients in before going on
                    await anyio.lowlevel.checkpoint()
                if isinstance(message, Done):
                    return self._finish(message, len(body))  # its reservation lasts until the run ends
                if isinstance(message, Sites | Progress):
                    self._release(reserved)
                    ended = self._check_sites(message) if isinstance(message, Sites) else self._progress(message)
                    if ended is not None:
                        return ended
                    continue
                refused = self._refuse(len(body))
                if refused is not None:
                    return refused
                if message.id is not None:
                    if message.id in self._ids:
                        raise ProtocolError(f"call id {message.id} is already waiting for its reply")
                    self._ids.add(message.id)
                self._in_flight += 1
                self._unanswered += 1
                if self._unanswered == 1:
                    self._seat.stand()
                self._held += len(body)
                if task_group is None:
                    return message, len(body), reserved
                task_group.start_soon(self._answer, message, len(body), reserved)
        except ProtocolError as exc:
            return self._failed(Verdict.CRASHED, f"the worker broke the protocol: {exc}")
        except GONE:
            return await self._crashed()

    async def _reserve(self, body: bytes) -> int | RunResult:
        """Reserve what decoding `body` may take of the host's memory: the bytes reserved, or the end of a run
        whose frame could never fit."""
        if self._memory is None or len(body) < RESERVED_FROM:
            return 0
        size = decoded_size(body)
        if not self._memory.fits(size):
            return self._failed(
                Verdict.LIMIT,
                f"a message of the run ({len(body) // 1024:,} KB) would take about {size // _MB:,} MB of gateway "
                f"memory, more than sandbox.max_host_memory_mb ({self._memory.limit // _MB:,} MB); move less data",
            )
        self._waiting_for_memory = True
        await self._memory.reserve(size)
        self._waiting_for_memory = False
        self._reserved += size
        return size

    def _release(self, size: int) -> None:
        if size and self._memory is not None:
            self._reserved -= size
            self._memory.release(size)

    def _refuse(self, size: int) -> RunResult | None:
        """The end of the run if one more call of `size` bytes is past a cap."""
        self.calls += 1
        if self.calls > self.limits.max_calls:
            return self._failed(
                Verdict.LIMIT, f"more than {self.limits.max_calls} pack calls in one run (sandbox.max_calls)"
            )
        if self._in_flight >= MAX_IN_FLIGHT:
            return self._failed(
                Verdict.LIMIT, f"the worker sent more than {MAX_IN_FLIGHT} pack calls without waiting for their replies"
            )
        if self._held + size > self._max_held:
            return self._overflowed()
        return None

    def _check_sites(self, message: Sites) -> RunResult | None:
        """The end of the run if a call the source shows is wrong; the worker sends its sites once, first."""
        if self._sites_seen or self.calls:
            raise ProtocolError("call sites come once, before any pack call")
        self._sites_seen = True
        error = None if self.on_sites is None else self.on_sites(message.sites)
        return None if error is None else RunResult(None, "", error, self.calls)

    def _progress(self, report: Progress) -> RunResult | None:
        """Pass the report on if the rate allows (a token bucket), else drop it; the end of a flooding run."""
        if not self._progress_ration.take(anyio.current_time()):
            self._progress_dropped += 1
            if self._progress_dropped > PROGRESS_FLOOD:
                return self._failed(
                    Verdict.LIMIT, f"the worker sent progress reports far faster than {PROGRESS_RATE} a second"
                )
            return None
        if self.on_progress is not None:
            self.on_progress(report.done, report.total, report.message)
        return None

    def _overflowed(self) -> RunResult:
        return self._failed(
            Verdict.LIMIT,
            f"pack calls and their replies held more than {self._max_held} bytes at once "
            f"({HELD_MESSAGES} x sandbox.max_message)",
        )

    async def _answer(self, call: Call, size: int, reserved: int) -> None:
        frame = b""
        try:
            if call.refusal is not None:
                refused = ToolError(call.refusal, origin="host")
                frame = reply_frame(call, error=refused, kind="UnknownTool", limits=self.limits, sent=self._sent)
            else:
                frame = await self._reply(call)
            self._unanswered -= 1
            if self._unanswered == 0:
                await self._seat.sit()  # the worker computes again once this reply reaches it
            self._held += len(frame)
            if self._held > self._max_held:
                self._overflow = self._overflowed()
                assert self._answering is not None
                self._answering.cancel_scope.cancel()
                return
            with contextlib.suppress(*GONE):  # the worker died; _serve notices and reports it
                await self.worker.channel.send_frame(frame)
        finally:
            self._release(reserved)
            self._in_flight -= 1
            self._held -= size + len(frame)
            if call.id is not None:
                self._ids.discard(call.id)

    async def _reply(self, call: Call) -> bytes:
        try:
            value = await self.on_call(call.pack, call.tool, call.args, call.kwargs)
        except Exception as exc:  # whatever on_call raises is the snippet's ToolError, of its kind if it has one
            kind = type(exc).__name__ if TOOL_ERRORS.get(type(exc).__name__) is type(exc) else "ToolError"
            if not isinstance(exc, ToolError):  # not one of on_call's answers: the host failed the call
                exc = ToolError(str(exc) or type(exc).__name__, origin="host")
            return reply_frame(call, error=exc, kind=kind, limits=self.limits, sent=self._sent)
        return reply_frame(call, value, limits=self.limits, sent=self._sent)

    async def _crashed(self) -> RunResult:
        with anyio.move_on_after(1.0):
            await self.worker.wait()
        if self.worker.lost:
            return self._failed(Verdict.CRASHED, "the sandbox fork-server died during the run; it is being restarted")
        code = self.worker.returncode
        if code == -signal.SIGXCPU:
            cpu = self.limits.cpu_seconds or self.limits.timeout
            return self._failed(
                Verdict.TIMEOUT, f"run exceeded its {float(cpu)} s CPU time limit (sandbox.cpu_seconds)"
            )
        if code == -signal.SIGSEGV:
            # CPython 3.11 recurses in C without a depth check in places (hash() of deeply nested tuples):
            # the snippet's data, not the host, overflowed the stack. The worker runs nothing but the
            # snippet, so it is the snippet's error, reported in the shape Python gives the checked case.
            return RunResult(None, "", RunError("RecursionError", C_STACK_OVERFLOW, origin="code"), self.calls)
        if code is not None and code < 0:
            return self._failed(Verdict.CRASHED, f"the worker died with signal {signal.Signals(-code).name}")
        return self._failed(Verdict.CRASHED, f"the worker exited unexpectedly (status {code})")

    def _finish(self, done: Done, size: int) -> RunResult:
        """The worker's report; its error is the snippet's own ("code") unless it is exactly one this run's
        replies carried ("tool")."""
        self.finished = True
        if done.error is not None and done.error in self._sent:
            done.error.origin = "tool"
        return RunResult(done.value, done.output, done.error, self.calls, size, done.head)

    def _failed(self, verdict: Verdict, message: str) -> RunResult:
        """A verdict of the host's."""
        return RunResult(None, "", verdict.error(message), self.calls)
