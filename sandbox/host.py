"""The host side: an async Sandbox that runs each snippet in its own pre-started, confined worker."""

from __future__ import annotations

import contextlib
import importlib.util
import math
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Collection, Mapping
from dataclasses import asdict
from pathlib import Path
from typing import Any

import anyio
from anyio.abc import ByteSendStream, Process, TaskGroup
from anyio.streams.buffered import BufferedByteReceiveStream

from sandbox.api import Limits, OnCall, RunError, RunResult
from sandbox.channel import HEADER, ProtocolError, check_size, decode, encode
from sandbox.confine import compile_filter

_START_TIMEOUT = 30.0
"""Seconds a new worker has to import everything and say ready."""
_JOB_CAP = 1 << 30
_READY_CAP = 64
_GONE = (anyio.EndOfStream, anyio.IncompleteRead, anyio.BrokenResourceError, anyio.ClosedResourceError)


def _import_root(module: str) -> str:
    spec = importlib.util.find_spec(module)
    assert spec is not None and spec.origin is not None, f"{module} is not installed"
    return str(Path(spec.origin).parent.parent)


# -S skips site (and the editable-install finders it loads): the worker gets exactly the two paths it
# needs. The package is registered by hand so that sandbox/__init__ (anyio, dataclasses: 40 ms of start-up
# the worker has no use for) is never executed there.
_BOOTSTRAP = (
    "import sys, types\n"
    "sys.path[:0] = {paths!r}\n"
    "package = types.ModuleType('sandbox')\n"
    "package.__path__ = [{package!r}]\n"
    "sys.modules['sandbox'] = package\n"
    "from sandbox.worker import main\n"
    "main()\n"
).format(
    paths=[str(Path(__file__).resolve().parent.parent), _import_root("RestrictedPython")],
    package=str(Path(__file__).resolve().parent),
)


class _Channel:
    """The host's end of the length-prefixed JSON channel, on the worker's stdin/stdout pipes."""

    def __init__(self, send_stream: ByteSendStream, receive_stream: BufferedByteReceiveStream) -> None:
        self._send = send_stream
        self._receive = receive_stream

    async def send(self, message: Any, max_size: int) -> None:
        await self.send_frame(encode(message, max_size))

    async def send_frame(self, frame: bytes) -> None:
        await self._send.send(frame)

    async def receive(self, max_size: int) -> Any:
        (size,) = HEADER.unpack(await self._receive.receive_exactly(HEADER.size))
        check_size(size, max_size)
        return decode(await self._receive.receive_exactly(size))


class _Worker:
    def __init__(self, process: Process) -> None:
        assert process.stdin is not None and process.stdout is not None
        self.process = process
        self.channel = _Channel(process.stdin, BufferedByteReceiveStream(process.stdout))

    def kill(self) -> None:
        # os.kill, not Process.kill: Popen.send_signal polls first and may reap the child behind asyncio's
        # back. Until we reap it the pid stays ours (a zombie at worst), so signalling it is safe.
        if self.process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.process.pid, signal.SIGKILL)


class _SpawnFailure:
    def __init__(self, reason: str) -> None:
        self.reason = reason


class Sandbox:
    """Runs snippets, one fresh confined worker process per run, with `warm` workers kept ready."""

    def __init__(self, limits: Limits = Limits(), *, warm: int = 2) -> None:  # noqa: B008 (frozen, immutable)
        self.limits = limits
        self._warm = max(0, warm)
        self._program = compile_filter().hex()
        self._task_group: TaskGroup | None = None
        self._ready_send, self._ready_receive = anyio.create_memory_object_stream[_Worker | _SpawnFailure](math.inf)
        self._live: set[_Worker] = set()
        self._closing = False

    async def __aenter__(self) -> Sandbox:
        task_group = anyio.create_task_group()
        await task_group.__aenter__()
        self._task_group = task_group
        for _ in range(self._warm):
            task_group.start_soon(self._own_worker)
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._task_group is not None
        self._closing = True
        for worker in list(self._live):
            worker.kill()
        try:
            await self._task_group.__aexit__(None, None, None)
        finally:
            self._task_group = None
            self._ready_send.close()
            self._ready_receive.close()

    async def _own_worker(self) -> None:
        """One worker's whole life, start to reap: the process is always waited for and its directory removed."""
        directory = tempfile.mkdtemp(prefix="onetool-sandbox-")
        try:
            try:
                process = await anyio.open_process(
                    [sys.executable, "-I", "-S", "-c", _BOOTSTRAP, str(os.getpid()), self._program],
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.DEVNULL,
                    cwd=directory,
                    env={},
                    start_new_session=True,
                )
            except OSError as exc:
                self._offer(_SpawnFailure(f"could not start a sandbox worker: {exc}"))
                return
            worker = _Worker(process)
            self._live.add(worker)
            try:
                await self._greet(worker)
                await process.wait()
            finally:
                worker.kill()
                with anyio.CancelScope(shield=True):
                    await process.aclose()
                self._live.discard(worker)
        finally:
            shutil.rmtree(directory, ignore_errors=True)

    async def _greet(self, worker: _Worker) -> None:
        if self._closing:
            worker.kill()
            return
        ready: Any = None
        with anyio.move_on_after(_START_TIMEOUT):
            try:
                ready = await worker.channel.receive(_READY_CAP)
            except (*_GONE, ProtocolError):
                pass
        if ready == {"op": "ready"} and not self._closing:
            self._offer(worker)
        else:
            worker.kill()
            self._offer(_SpawnFailure(f"a sandbox worker failed to start (exit status {worker.process.returncode})"))

    def _offer(self, item: _Worker | _SpawnFailure) -> None:
        if not self._closing:
            self._ready_send.send_nowait(item)

    async def _acquire(self) -> tuple[_Worker | _SpawnFailure, bool]:
        """A ready worker, and whether its replacement is still to be started.

        Each worker taken is replaced. With one ready the replacement waits until the run is over, so the
        blocking fork/exec of a new process never lands on a run's critical path; with none ready it
        starts at once, so a burst starts as many workers as it needs.
        """
        if self._task_group is None or self._closing:
            raise RuntimeError("Sandbox.run() needs an entered sandbox: `async with Sandbox() as sandbox:`")
        while True:
            deferred = self._ready_receive.statistics().current_buffer_used > 0
            if not deferred:
                self._task_group.start_soon(self._own_worker)
            item = await self._ready_receive.receive()
            if isinstance(item, _SpawnFailure) or item.process.returncode is None:
                return item, deferred
            if deferred:
                self._task_group.start_soon(self._own_worker)

    async def run(
        self,
        code: str,
        *,
        packs: Mapping[str, Collection[str]],
        on_call: OnCall,
        limits: Limits | None = None,
        _unrestricted: bool = False,
    ) -> RunResult:
        """Run one snippet. Never raises for anything the snippet does: that ends up in RunResult.error.

        `_unrestricted` (tests only) runs plain Python with real builtins in the same confined worker, to
        show that the OS layer holds on its own.
        """
        limits = limits or self.limits
        item, deferred = await self._acquire()
        if isinstance(item, _SpawnFailure):
            return RunResult(None, "", RunError("WorkerCrashed", item.reason), 0)
        run = _Run(item, limits, on_call)
        try:
            return await run.drive(
                {
                    "op": "run",
                    "code": code,
                    "packs": {name: sorted(tools) for name, tools in packs.items()},
                    "limits": {**asdict(limits), "cpu_seconds": limits.cpu_seconds or limits.timeout},
                    "unrestricted": _unrestricted,
                }
            )
        finally:
            item.kill()
            if deferred and self._task_group is not None and not self._closing:
                self._task_group.start_soon(self._own_worker)


class _Run:
    """The host's half of one run: answer pack calls in child tasks until the worker reports, dies or times out."""

    def __init__(self, worker: _Worker, limits: Limits, on_call: OnCall) -> None:
        self.worker = worker
        self.limits = limits
        self.on_call = on_call
        self.calls = 0

    async def drive(self, job: dict[str, Any]) -> RunResult:
        result: RunResult | None = None
        with anyio.move_on_after(self.limits.timeout):
            async with anyio.create_task_group() as task_group:
                result = await self._serve(job, task_group)
                task_group.cancel_scope.cancel()
        if result is None:
            self.worker.kill()
            timeout = float(self.limits.timeout)
            return self._failed("TimeoutError", f"run exceeded the {timeout} s time limit (sandbox.timeout)")
        return result

    async def _serve(self, job: dict[str, Any], task_group: TaskGroup) -> RunResult:
        # Replies and results may carry a full max_message payload plus the envelope around it.
        cap = self.limits.max_message + 4096
        try:
            await self.worker.channel.send(job, _JOB_CAP)
            while True:
                message = await self.worker.channel.receive(cap)
                op = message.get("op") if isinstance(message, dict) else None
                if op == "call" and _is_call(message):
                    self.calls += 1
                    if self.calls > self.limits.max_calls:
                        return self._failed(
                            "LimitError", f"more than {self.limits.max_calls} pack calls in one run (sandbox.max_calls)"
                        )
                    task_group.start_soon(self._answer, message)
                elif op == "done":
                    return self._finish(message)
                else:
                    return self._failed("WorkerCrashed", "the worker broke the protocol")
        except ProtocolError as exc:
            return self._failed("WorkerCrashed", f"the worker broke the protocol: {exc}")
        except _GONE:
            return await self._crashed()

    async def _answer(self, message: dict[str, Any]) -> None:
        pack, tool = message["pack"], message["tool"]
        try:
            reply: dict[str, Any] = {"value": await self.on_call(pack, tool, message["args"], message["kwargs"])}
        except Exception as exc:  # whatever on_call raises is the snippet's ToolError
            reply = {"error": str(exc) or type(exc).__name__}
        try:
            frame = encode(reply, self.limits.max_message)
        except ProtocolError:
            frame = encode({"error": f"the result of {pack}.{tool} exceeds {self.limits.max_message} bytes"}, 4096)
        except (TypeError, ValueError) as exc:
            frame = encode({"error": f"the result of {pack}.{tool} is not JSON data: {exc}"}, 4096)
        with contextlib.suppress(*_GONE):  # the worker died; _serve notices and reports it
            await self.worker.channel.send_frame(frame)

    async def _crashed(self) -> RunResult:
        with anyio.move_on_after(1.0):
            await self.worker.process.wait()
        code = self.worker.process.returncode
        if code == -signal.SIGXCPU:
            cpu = self.limits.cpu_seconds or self.limits.timeout
            return self._failed("TimeoutError", f"run exceeded its {float(cpu)} s CPU time limit (sandbox.cpu_seconds)")
        if code is not None and code < 0:
            return self._failed("WorkerCrashed", f"the worker died with signal {signal.Signals(-code).name}")
        return self._failed("WorkerCrashed", f"the worker exited unexpectedly (status {code})")

    def _finish(self, message: dict[str, Any]) -> RunResult:
        output = message.get("output")
        error = message.get("error")
        if not isinstance(output, str) or not (error is None or _is_error(error)):
            return self._failed("WorkerCrashed", "the worker broke the protocol")
        # The worker already cut it; a worker that did not is cut here, note included.
        output = output[: self.limits.max_output + 200]
        if error is not None:
            return RunResult(None, output, RunError(**error), self.calls)
        return RunResult(message.get("value"), output, None, self.calls)

    def _failed(self, kind: str, message: str) -> RunResult:
        return RunResult(None, "", RunError(kind, message), self.calls)


def _is_call(message: dict[str, Any]) -> bool:
    return (
        isinstance(message.get("pack"), str)
        and isinstance(message.get("tool"), str)
        and isinstance(message.get("args"), list)
        and isinstance(message.get("kwargs"), dict)
    )


def _is_error(error: Any) -> bool:
    return (
        isinstance(error, dict)
        and set(error) == {"type", "message", "line", "column", "source"}
        and isinstance(error["type"], str)
        and isinstance(error["message"], str)
        and all(error[k] is None or type(error[k]) is int for k in ("line", "column"))
        and (error["source"] is None or isinstance(error["source"], str))
    )
