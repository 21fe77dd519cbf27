"""The host side: an async Sandbox that runs each snippet in its own fresh, confined worker.

Workers are forked by a fork-server (sandbox/zygote.py), which the host starts once and restarts
should it die; the host keeps `warm` forked, already confined workers ready, so a run only sends its
job. Only JSON crosses between processes, never pickle.
"""

from __future__ import annotations

import contextlib
import importlib.util
import itertools
import json
import math
import os
import signal
import socket
import sys
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
from anyio.abc import ObjectSendStream, TaskGroup

from sandbox.api import Limits, OnCall, RunError, RunResult
from sandbox.channel import HEADER, JOB_CAP, ProtocolError, check_size, decode, encode
from sandbox.confine import compile_filter
from sandbox.errors import TOOL_ERRORS
from sandbox.launch import ZygoteProcess

_START_TIMEOUT = 30.0
"""Seconds the zygote has to import everything and say ready, and a forked worker to confine itself."""
_STOP_TIMEOUT = 5.0
"""Seconds the zygote has to kill and reap its workers when the sandbox closes."""
_RETRY_DELAY = 1.0
"""Seconds between attempts to start a zygote that failed to start; forks fail meanwhile."""
_READY_CAP = 64
_CONTROL_CAP = 4096
_GONE = (anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError, ConnectionError)


def _import_root(module: str) -> str:
    spec = importlib.util.find_spec(module)
    assert spec is not None and spec.origin is not None, f"{module} is not installed"
    return str(Path(spec.origin).parent.parent)


# -S skips site (and the editable-install finders it loads): the zygote gets exactly the two paths it
# needs. The package is registered by hand so that sandbox/__init__ (anyio, dataclasses: 40 ms of start-up
# the zygote has no use for) is never executed there.
_BOOTSTRAP = (
    "import sys, types\n"
    "sys.path[:0] = {paths!r}\n"
    "package = types.ModuleType('sandbox')\n"
    "package.__path__ = [{package!r}]\n"
    "sys.modules['sandbox'] = package\n"
    "from sandbox.zygote import main\n"
    "main()\n"
).format(
    paths=[str(Path(__file__).resolve().parent.parent), _import_root("RestrictedPython")],
    package=str(Path(__file__).resolve().parent),
)


class _Channel:
    """The host's end of the length-prefixed JSON channel: a non-blocking socket, read and written directly."""

    def __init__(self, sock: socket.socket) -> None:
        sock.setblocking(False)
        self.sock = sock
        self._buffer = bytearray()
        # Pack-call replies are sent from concurrent tasks; frames must not interleave.
        self._send_lock = anyio.Lock(fast_acquire=True)

    async def send(self, message: Any, max_size: int) -> None:
        await self.send_frame(encode(message, max_size))

    async def send_frame(self, frame: bytes) -> None:
        async with self._send_lock:
            view = memoryview(frame)
            while view:
                try:
                    view = view[self.sock.send(view) :]
                except BlockingIOError:
                    await anyio.wait_writable(self.sock)

    async def receive(self, max_size: int) -> Any:
        (size,) = HEADER.unpack(await self._read(HEADER.size))
        check_size(size, max_size)
        return decode(await self._read(size))

    async def _read(self, size: int) -> bytes:
        buffer = self._buffer
        while len(buffer) < size:
            try:
                chunk = self.sock.recv(max(size - len(buffer), 65536))
            except BlockingIOError:
                await anyio.wait_readable(self.sock)
                continue
            if not chunk:
                raise anyio.EndOfStream
            buffer += chunk
        data = bytes(buffer[:size])
        del buffer[:size]
        return data

    def close(self) -> None:
        anyio.notify_closing(self.sock)
        self.sock.close()


class _Worker:
    """One forked worker: its channel, and a pidfd to kill it with (never a pid the zygote may have reaped)."""

    def __init__(self, pid: int, pidfd: int, sock: socket.socket) -> None:
        self.pid = pid
        self.channel = _Channel(sock)
        self.returncode: int | None = None
        self.lost = False
        """The zygote died before reporting this worker's exit (the kernel killed it with the zygote)."""
        self.taken = False
        """A run owns the channel now and closes it when done, after reading all the worker sent."""
        self._pidfd = pidfd
        self._exited = anyio.Event()

    @property
    def running(self) -> bool:
        return not self._exited.is_set()

    def kill(self) -> None:
        if self.running:
            with contextlib.suppress(ProcessLookupError):
                signal.pidfd_send_signal(self._pidfd, signal.SIGKILL)

    def exited(self, returncode: int | None, *, lost: bool = False) -> None:
        if self.running:
            self.returncode = returncode
            self.lost = lost
            os.close(self._pidfd)
            self._exited.set()

    async def wait(self) -> None:
        await self._exited.wait()


class _SpawnFailure:
    def __init__(self, reason: str) -> None:
        self.reason = reason


@dataclass
class _Fork:
    memory_mb: int
    cpu_seconds: float
    done: anyio.Event = field(default_factory=anyio.Event)
    result: _Worker | _SpawnFailure | None = None

    def resolve(self, result: _Worker | _SpawnFailure) -> None:
        self.result = result
        self.done.set()


class _ForkServer:
    """Owns the zygote: starts it, forwards fork requests, routes its replies, restarts it when it dies."""

    def __init__(self, program: str) -> None:
        self._program = program
        self._control: socket.socket | None = None
        self._pending: dict[int, _Fork] = {}
        self._workers: dict[int, _Worker] = {}
        self._ids = itertools.count()
        self._failure: str | None = None
        self._stopping = anyio.Event()
        self._send_lock = anyio.Lock(fast_acquire=True)
        self.process: ZygoteProcess | None = None

    async def fork(self, memory_mb: int, cpu_seconds: float) -> _Worker | _SpawnFailure:
        if self._stopping.is_set():
            return _SpawnFailure("the sandbox is closing")
        if self._control is None and self._failure is not None:
            return _SpawnFailure(self._failure)
        request_id = next(self._ids)
        request = _Fork(memory_mb, cpu_seconds)
        self._pending[request_id] = request
        try:
            if self._control is not None:
                await self._send(self._control, request_id, request)
            await request.done.wait()
        except BaseException:
            # Cancelled: a worker forked for us has no other owner. One still to come is killed on arrival.
            if isinstance(request.result, _Worker):
                request.result.kill()
                request.result.channel.close()
            raise
        finally:
            self._pending.pop(request_id, None)
        assert request.result is not None
        return request.result

    async def _send(self, control: socket.socket, request_id: int, request: _Fork) -> None:
        data = json.dumps({"id": request_id, "memory_mb": request.memory_mb, "cpu_seconds": request.cpu_seconds})
        async with self._send_lock:
            while True:
                try:
                    control.send(data.encode())
                    return
                except BlockingIOError:
                    await anyio.wait_writable(control)
                except OSError:
                    return  # the zygote is gone; the request stays pending and is sent to its successor

    async def stop(self) -> None:
        """Close the control socket for writing: the zygote kills and reaps its workers, reports, exits."""
        self._stopping.set()
        if self._control is not None:
            with contextlib.suppress(OSError):
                self._control.shutdown(socket.SHUT_WR)

    async def run(self) -> None:
        while not self._stopping.is_set():
            started = await self._serve_one()
            if not started and not self._stopping.is_set():
                for request in self._pending.values():
                    request.resolve(_SpawnFailure(self._failure or "the sandbox fork-server failed to start"))
                with anyio.move_on_after(_RETRY_DELAY):
                    await self._stopping.wait()
        for request in self._pending.values():
            if not request.done.is_set():
                request.resolve(_SpawnFailure("the sandbox is closing"))

    async def _serve_one(self) -> bool:
        """One zygote's life; whether it got as far as ready."""
        host_end, zygote_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        started = False
        try:
            try:
                argv = [sys.executable, "-I", "-S", "-c", _BOOTSTRAP, str(os.getpid()), self._program]
                process = ZygoteProcess(argv, zygote_end.fileno())
            except OSError as exc:
                self._failure = f"could not start the sandbox fork-server: {exc}"
                return False
            finally:
                zygote_end.close()
            self.process = process
            host_end.setblocking(False)
            try:
                with anyio.move_on_after(_START_TIMEOUT):
                    message, _ = await self._receive(host_end)
                    started = message == {"op": "ready"}
                if not started:
                    self._failure = f"the sandbox fork-server failed to start (exit status {process.returncode})"
                    return False
                self._failure = None
                self._control = host_end
                if self._stopping.is_set():
                    await self.stop()
                for request_id, request in list(self._pending.items()):
                    if not request.done.is_set():
                        await self._send(host_end, request_id, request)
                while True:
                    message, fds = await self._receive(host_end)
                    self._dispatch(message, fds)
            except (*_GONE, ProtocolError, OSError):
                return started
            finally:
                self._control = None
                for worker in self._workers.values():
                    worker.exited(None, lost=True)
                self._workers.clear()
                with anyio.CancelScope(shield=True):
                    with anyio.move_on_after(_STOP_TIMEOUT if self._stopping.is_set() else 0):
                        await process.wait()
                    if process.returncode is None:
                        process.kill()
                    await process.aclose()
        finally:
            host_end.close()

    async def _receive(self, control: socket.socket) -> tuple[Any, list[int]]:
        while True:
            try:
                data, fds, _, _ = socket.recv_fds(control, _CONTROL_CAP, 2)
                break
            except BlockingIOError:
                await anyio.wait_readable(control)
        if not data:
            for fd in fds:
                os.close(fd)
            raise anyio.EndOfStream
        return decode(data), fds

    def _dispatch(self, message: Any, fds: list[int]) -> None:
        op = message.get("op")
        if op == "forked" and len(fds) == 2:
            worker = _Worker(message["pid"], fds[1], socket.socket(fileno=fds[0]))
            self._workers[worker.pid] = worker
            request = self._pending.get(message["id"])
            if request is None or request.done.is_set():
                # Nobody waits for it any more (the requester was cancelled): it must not linger.
                worker.kill()
                worker.channel.close()
            else:
                request.resolve(worker)
            return
        for fd in fds:
            os.close(fd)
        if op == "exit":
            worker = self._workers.pop(message["pid"], None)
            if worker is not None:
                worker.exited(message["returncode"])
        elif op == "failed":
            request = self._pending.get(message["id"])
            if request is not None and not request.done.is_set():
                request.resolve(_SpawnFailure(f"could not fork a sandbox worker: {message['reason']}"))


def _confinement(limits: Limits) -> tuple[int, float]:
    """The limits a worker is confined with while idle, before its job arrives; other limits need their own fork."""
    return limits.memory_mb, limits.cpu_seconds or limits.timeout


class Sandbox:
    """Runs snippets, one fresh confined worker process per run, with `warm` workers kept ready."""

    def __init__(self, limits: Limits = Limits(), *, warm: int = 2) -> None:  # noqa: B008 (frozen, immutable)
        self.limits = limits
        self._warm = max(0, warm)
        self._forks = _ForkServer(compile_filter().hex())
        self._pool_key = _confinement(limits)
        self._task_group: TaskGroup | None = None
        self._ready_send, self._ready_receive = anyio.create_memory_object_stream[_Worker | _SpawnFailure](math.inf)
        self._live: set[_Worker] = set()
        self._closing = False
        self._refills = 0
        self._refill_wanted = anyio.Event()

    async def __aenter__(self) -> Sandbox:
        task_group = anyio.create_task_group()
        await task_group.__aenter__()
        self._task_group = task_group
        task_group.start_soon(self._forks.run)
        task_group.start_soon(self._refill)
        for _ in range(self._warm):
            task_group.start_soon(self._own_worker, self._ready_send, self._pool_key)
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._task_group is not None
        self._closing = True
        self._refill_wanted.set()
        for worker in list(self._live):
            worker.kill()
        await self._forks.stop()
        try:
            await self._task_group.__aexit__(None, None, None)
        finally:
            self._task_group = None
            self._ready_send.close()
            self._ready_receive.close()

    async def _refill(self) -> None:
        """Replace the pool workers runs took, once they asked (`_replace`): starting a task costs a run
        a few hundred microseconds it should not wait for, so it happens after the run has returned."""
        while True:
            await self._refill_wanted.wait()
            if self._closing or self._task_group is None:
                return
            self._refill_wanted = anyio.Event()
            count, self._refills = self._refills, 0
            for _ in range(count):
                self._task_group.start_soon(self._own_worker, self._ready_send, self._pool_key)

    def _replace(self) -> None:
        self._refills += 1
        self._refill_wanted.set()

    async def _own_worker(self, deliver: ObjectSendStream[_Worker | _SpawnFailure], key: tuple[int, float]) -> None:
        """One worker's whole life, fork to exit: it is always killed, its exit awaited and its channel closed.

        A worker lost with the zygote before it was ready is replaced, once the zygote is back.
        """
        while True:
            item = await self._forks.fork(*key)
            if isinstance(item, _SpawnFailure):
                self._offer(deliver, item)
                return
            worker = item
            self._live.add(worker)
            try:
                if await self._greet(worker, deliver):
                    await worker.wait()
                    return
            finally:
                worker.kill()
                with anyio.CancelScope(shield=True), anyio.move_on_after(_STOP_TIMEOUT):
                    await worker.wait()
                if not worker.taken:
                    worker.channel.close()
                self._live.discard(worker)
            if not worker.lost or self._closing:
                self._offer(
                    deliver, _SpawnFailure(f"a sandbox worker failed to start (exit status {worker.returncode})")
                )
                return

    async def _greet(self, worker: _Worker, deliver: ObjectSendStream[_Worker | _SpawnFailure]) -> bool:
        """Whether the worker said ready and was handed on."""
        if self._closing:
            return False
        ready: Any = None
        with anyio.move_on_after(_START_TIMEOUT):
            try:
                ready = await worker.channel.receive(_READY_CAP)
            except (*_GONE, ProtocolError):
                pass
        if ready == {"op": "ready"}:
            if not self._offer(deliver, worker):
                worker.kill()
            return True
        return False

    def _offer(self, deliver: ObjectSendStream[_Worker | _SpawnFailure], item: _Worker | _SpawnFailure) -> bool:
        if self._closing:
            return False
        try:
            deliver.send_nowait(item)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, anyio.WouldBlock):
            return False  # the run that asked for this worker was cancelled
        return True

    async def _acquire(self, key: tuple[int, float]) -> tuple[_Worker | _SpawnFailure, bool]:
        """A ready worker, and whether its replacement is still to be started.

        Each pool worker taken is replaced. With one ready the replacement waits until the run is over, so
        the fork never lands on a run's critical path; with none ready it starts at once, so a burst forks
        as many workers as it needs. A run with other confinement limits gets a worker of its own.
        """
        if self._task_group is None or self._closing:
            raise RuntimeError("Sandbox.run() needs an entered sandbox: `async with Sandbox() as sandbox:`")
        if key != self._pool_key:
            deliver, receive = anyio.create_memory_object_stream[_Worker | _SpawnFailure](1)
            with deliver, receive:
                self._task_group.start_soon(self._own_worker, deliver, key)
                return await receive.receive(), False
        while True:
            deferred = self._ready_receive.statistics().current_buffer_used > 0
            if not deferred:
                self._task_group.start_soon(self._own_worker, self._ready_send, key)
            try:
                # A ready worker is taken at once: no trip round the event loop on a run's critical path.
                await anyio.lowlevel.checkpoint_if_cancelled()
                item = self._ready_receive.receive_nowait()
            except anyio.WouldBlock:
                item = await self._ready_receive.receive()
            if isinstance(item, _SpawnFailure) or item.running:
                return item, deferred
            if deferred:
                self._task_group.start_soon(self._own_worker, self._ready_send, key)

    async def run(
        self,
        code: str,
        *,
        packs: Mapping[str, Collection[str]],
        on_call: OnCall,
        limits: Limits | None = None,
    ) -> RunResult:
        """Run one snippet. Never raises for anything the snippet does: that ends up in RunResult.error."""
        limits = limits or self.limits
        job = {
            "op": "run",
            "code": code,
            "packs": {name: sorted(tools) for name, tools in packs.items()},
            "limits": {**vars(limits), "cpu_seconds": limits.cpu_seconds or limits.timeout},
        }
        frame = encode(job, JOB_CAP)
        # A worker lost with the zygote before the snippet made any pack call had no effect outside
        # itself: the run is safely repeated once in a fresh worker from the restarted zygote.
        retries = 1
        while True:
            item, deferred = await self._acquire(_confinement(limits))
            if isinstance(item, _SpawnFailure):
                return RunResult(None, "", RunError("WorkerCrashed", item.reason), 0)
            item.taken = True
            run = _Run(item, limits, on_call)
            try:
                result = await run.drive(frame)
            finally:
                item.kill()
                item.channel.close()
                if deferred and self._task_group is not None and not self._closing:
                    self._replace()
            if not (item.lost and run.calls == 0 and retries):
                return result
            retries -= 1


class _Run:
    """The host's half of one run: answer pack calls in child tasks until the worker reports, dies or times out."""

    def __init__(self, worker: _Worker, limits: Limits, on_call: OnCall) -> None:
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
        if result is None:
            self.worker.kill()
            timeout = float(self.limits.timeout)
            return self._failed("TimeoutError", f"run exceeded the {timeout} s time limit (sandbox.timeout)")
        return result

    async def _serve(self, job: bytes | None, task_group: TaskGroup | None) -> RunResult | dict[str, Any]:
        """Send `job` if given, then read until the end; without a task group, a valid pack call within
        max_calls is returned, for the caller to answer once it has one."""
        # Replies and results may carry a full max_message payload plus the envelope around it.
        cap = self.limits.max_message + 4096
        try:
            if job is not None:
                await self.worker.channel.send_frame(job)
            while True:
                message = await self.worker.channel.receive(cap)
                op = message.get("op") if isinstance(message, dict) else None
                if op == "call" and _is_call(message):
                    self.calls += 1
                    if self.calls > self.limits.max_calls:
                        return self._failed(
                            "LimitError", f"more than {self.limits.max_calls} pack calls in one run (sandbox.max_calls)"
                        )
                    if task_group is None:
                        return message
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
        except Exception as exc:  # whatever on_call raises is the snippet's ToolError, of its kind if it has one
            kind = type(exc).__name__ if TOOL_ERRORS.get(type(exc).__name__) is type(exc) else "ToolError"
            reply = {"error": str(exc) or type(exc).__name__, "type": kind}
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
