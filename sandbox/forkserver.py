"""The fork-server client: starts the zygote (sandbox/zygote.py), asks it for confined workers, routes its
replies, restarts it when it dies; and the handle of one forked worker. Only JSON crosses, never pickle."""

from __future__ import annotations

import contextlib
import importlib.util
import itertools
import json
import os
import signal
import socket
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio

from sandbox.channel import ProtocolError, decode
from sandbox.launch import ZygoteProcess
from sandbox.socket_channel import SocketChannel

__all__ = ["GONE", "START_TIMEOUT", "STOP_TIMEOUT", "ForkServer", "SpawnFailure", "Worker"]

START_TIMEOUT = 30.0
"""Seconds the zygote has to import everything and say ready, and a forked worker to confine itself."""
STOP_TIMEOUT = 5.0
"""Seconds the zygote has to kill and reap its workers when the sandbox closes."""
_RETRY_DELAY = 1.0
"""Seconds between attempts to start a zygote that failed to start; forks fail meanwhile."""
_CONTROL_CAP = 4096
GONE = (anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError, ConnectionError)


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


class Worker:
    """One forked worker: its channel, and a pidfd to kill it with (never a pid the zygote may have reaped)."""

    def __init__(self, pidfd: int, sock: socket.socket) -> None:
        self.channel = SocketChannel(sock)
        self.returncode: int | None = None
        self.lost = False
        """The zygote died before reporting this worker's exit (the kernel killed it with the zygote)."""
        self.taken = False
        """A run owns the worker now and discards it when done, after reading all the worker sent."""
        self._pidfd = pidfd
        self._exited = anyio.Event()
        self._discarded = False

    @property
    def running(self) -> bool:
        return not self._exited.is_set()

    @property
    def pid(self) -> int:
        """The pid this process knows the worker by, read when asked (only diagnostics need it): our fdinfo for
        the pidfd names it in our pid namespace, where the zygote, init of a namespace of its own, sees 2, 3..."""
        if self.running:
            with contextlib.suppress(OSError), open(f"/proc/self/fdinfo/{self._pidfd}") as info:
                for line in info:
                    if line.startswith("Pid:") and (pid := int(line.split()[1])) > 0:
                        return pid
        raise ProcessLookupError("the worker has exited")

    def discard(self) -> None:
        """Kill the worker and close its channel: the one way a worker ends, whoever ends it; idempotent."""
        if self.running:
            with contextlib.suppress(ProcessLookupError):
                signal.pidfd_send_signal(self._pidfd, signal.SIGKILL)
        if not self._discarded:
            self._discarded = True
            self.channel.close()

    def exited(self, returncode: int | None, *, lost: bool = False) -> None:
        if self.running:
            self.returncode = returncode
            self.lost = lost
            os.close(self._pidfd)
            self._exited.set()

    async def wait(self) -> None:
        await self._exited.wait()


class SpawnFailure:
    def __init__(self, reason: str) -> None:
        self.reason = reason


@dataclass
class _Fork:
    memory_mb: int
    cpu_seconds: float
    prefault: bool
    done: anyio.Event = field(default_factory=anyio.Event)
    result: Worker | SpawnFailure | None = None

    def resolve(self, result: Worker | SpawnFailure) -> None:
        self.result = result
        self.done.set()


class ForkServer:
    """Owns the zygote: starts it, forwards fork requests, routes its replies, restarts it when it dies."""

    def __init__(self, program: str) -> None:
        self._program = program
        self._control: socket.socket | None = None
        self._pending: dict[int, _Fork] = {}
        self._workers: dict[int, Worker] = {}
        """By the pid the zygote knows them by, which its exit reports name."""
        self._ids = itertools.count()
        self._failure: str | None = None
        self._stopping = anyio.Event()
        self._send_lock = anyio.Lock(fast_acquire=True)
        self.process: ZygoteProcess | None = None

    async def fork(self, memory_mb: int, cpu_seconds: float, *, prefault: bool = True) -> Worker | SpawnFailure:
        """A worker confined with these limits; with `prefault`, one that took its copy-on-write faults while
        idle (sandbox/worker.py), which a worker wanted at once has no time for."""
        if self._stopping.is_set():
            return SpawnFailure("the sandbox is closing")
        if self._control is None and self._failure is not None:
            return SpawnFailure(self._failure)
        request_id = next(self._ids)
        request = _Fork(memory_mb, cpu_seconds, prefault)
        self._pending[request_id] = request
        try:
            if self._control is not None:
                await self._send(self._control, request_id, request)
            await request.done.wait()
        except BaseException:
            # Cancelled: a worker forked for us has no other owner. One still to come is killed on arrival.
            if isinstance(request.result, Worker):
                request.result.discard()
            raise
        finally:
            self._pending.pop(request_id, None)
        assert request.result is not None
        return request.result

    async def _send(self, control: socket.socket, request_id: int, request: _Fork) -> None:
        fields = {"memory_mb": request.memory_mb, "cpu_seconds": request.cpu_seconds, "prefault": request.prefault}
        data = json.dumps({"id": request_id, **fields})
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
                    request.resolve(SpawnFailure(self._failure or "the sandbox fork-server failed to start"))
                with anyio.move_on_after(_RETRY_DELAY):
                    await self._stopping.wait()
        for request in self._pending.values():
            if not request.done.is_set():
                request.resolve(SpawnFailure("the sandbox is closing"))

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
                with anyio.move_on_after(START_TIMEOUT):
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
            except (*GONE, ProtocolError, OSError):
                return started
            finally:
                self._control = None
                for worker in self._workers.values():
                    worker.exited(None, lost=True)
                self._workers.clear()
                with anyio.CancelScope(shield=True):
                    with anyio.move_on_after(STOP_TIMEOUT if self._stopping.is_set() else 0):
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
            worker = Worker(fds[1], socket.socket(fileno=fds[0]))
            self._workers[message["pid"]] = worker
            request = self._pending.get(message["id"])
            if request is None or request.done.is_set():
                # Nobody waits for it any more (the requester was cancelled): it must not linger.
                worker.discard()
            else:
                request.resolve(worker)
            return
        for fd in fds:
            os.close(fd)
        if op == "exit":
            exited = self._workers.pop(message["pid"], None)
            if exited is not None:
                exited.exited(message["returncode"])
        elif op == "failed":
            request = self._pending.get(message["id"])
            if request is not None and not request.done.is_set():
                request.resolve(SpawnFailure(f"could not fork a sandbox worker: {message['reason']}"))
