"""The host's half of one run: send the job, answer the worker's pack calls, read how the run ended."""

from __future__ import annotations

import contextlib
import signal

import anyio
from anyio.abc import TaskGroup

from sandbox.api import Limits, OnCall, RunError, RunResult
from sandbox.channel import ProtocolError, decode
from sandbox.errors import TOOL_ERRORS
from sandbox.forkserver import GONE, Worker
from sandbox.messages import REPLY_ENVELOPE, Call, Done, parse, reply_frame

__all__ = ["Run"]


class Run:
    """The host's half of one run: answer pack calls in child tasks until the worker reports, dies or times out."""

    def __init__(self, worker: Worker, limits: Limits, on_call: OnCall) -> None:
        self.worker = worker
        self.limits = limits
        self.on_call = on_call
        self.calls = 0

    async def drive(self, job: bytes) -> RunResult:
        """`job` is the encoded job frame."""
        result: RunResult | None = None
        with anyio.move_on_after(self.limits.timeout):
            # Most runs make no pack call: the task group that answers calls starts with the first one.
            first = await self._serve(job, None)
            if isinstance(first, RunResult):
                result = first
            else:
                async with anyio.create_task_group() as task_group:
                    task_group.start_soon(self._answer, first)
                    result = await self._serve(None, task_group)
                    task_group.cancel_scope.cancel()
        if result is None:  # the caller discards the worker
            timeout = float(self.limits.timeout)
            return self._failed("TimeoutError", f"run exceeded the {timeout} s time limit (sandbox.timeout)")
        return result

    async def _serve(self, job: bytes | None, task_group: TaskGroup | None) -> RunResult | Call:
        """Send `job` if given, then read until the end; without a task group, a pack call within
        max_calls is returned, for the caller to answer once it has one."""
        cap = self.limits.max_message + REPLY_ENVELOPE
        try:
            if job is not None:
                await self.worker.channel.send_frame(job)
            while True:
                message = parse(decode(await self.worker.channel.receive_frame(cap)))
                if isinstance(message, Done):
                    return self._finish(message)
                self.calls += 1
                if self.calls > self.limits.max_calls:
                    return self._failed(
                        "LimitError", f"more than {self.limits.max_calls} pack calls in one run (sandbox.max_calls)"
                    )
                if task_group is None:
                    return message
                task_group.start_soon(self._answer, message)
        except ProtocolError as exc:
            return self._failed("WorkerCrashed", f"the worker broke the protocol: {exc}")
        except GONE:
            return await self._crashed()

    async def _answer(self, call: Call) -> None:
        try:
            value = await self.on_call(call.pack, call.tool, call.args, call.kwargs)
        except Exception as exc:  # whatever on_call raises is the snippet's ToolError, of its kind if it has one
            kind = type(exc).__name__ if TOOL_ERRORS.get(type(exc).__name__) is type(exc) else "ToolError"
            frame = reply_frame(call, error=str(exc) or type(exc).__name__, kind=kind, limits=self.limits)
        else:
            frame = reply_frame(call, value, limits=self.limits)
        with contextlib.suppress(*GONE):  # the worker died; _serve notices and reports it
            await self.worker.channel.send_frame(frame)

    async def _crashed(self) -> RunResult:
        with anyio.move_on_after(1.0):
            await self.worker.wait()
        if self.worker.lost:
            return self._failed("WorkerCrashed", "the sandbox fork-server died during the run; it is being restarted")
        code = self.worker.returncode
        if code == -signal.SIGXCPU:
            cpu = self.limits.cpu_seconds or self.limits.timeout
            return self._failed("TimeoutError", f"run exceeded its {float(cpu)} s CPU time limit (sandbox.cpu_seconds)")
        if code is not None and code < 0:
            return self._failed("WorkerCrashed", f"the worker died with signal {signal.Signals(-code).name}")
        return self._failed("WorkerCrashed", f"the worker exited unexpectedly (status {code})")

    def _finish(self, done: Done) -> RunResult:
        # The worker already cut it; a worker that did not is cut here, note included.
        output = done.output[: self.limits.max_output + 200]
        return RunResult(None if done.error else done.value, output, done.error, self.calls)

    def _failed(self, kind: str, message: str) -> RunResult:
        return RunResult(None, "", RunError(kind, message), self.calls)
