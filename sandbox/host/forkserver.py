"""The fork-server client: starts the zygote (sandbox/worker/zygote.py), asks it for confined workers, routes its
replies, restarts it when it dies; and the handle of one forked worker. Only JSON crosses, never pickle."""

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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import anyio.abc

from sandbox.host._launch import ZygoteProcess
from sandbox.host._socket_channel import SocketChannel
from sandbox.protocol.channel import ProtocolError, decode

__all__ = [
    "GONE",
    "RECYCLE_FORKS",
    "RECYCLE_IDLE",
    "START_TIMEOUT",
    "STOP_TIMEOUT",
    "ForkServer",
    "SpawnFailure",
    "Worker",
]

START_TIMEOUT = 30.0
"""Seconds the zygote has to import everything and say ready, and a forked worker to confine itself."""
STOP_TIMEOUT = 5.0
"""Seconds the zygote has to kill and reap its workers when the sandbox closes."""
_RETRY_DELAY = 1.0
"""Seconds between attempts to start a zygote that failed to start; forks fail meanwhile."""
_CONTROL_CAP = 4096
RECYCLE_FORKS = 200
"""Forks one zygote serves before a fresh one takes over. A worker forked on demand inherits the zygote's heap,
which each fork request and each live worker's bookkeeping shape a little, so addresses and the heap's layout
seen in one run say something about the runs before it and those under way. A fresh zygote is a new process:
a new hash seed, a new address-space layout, no history."""
RECYCLE_IDLE = 30.0
"""Seconds without a fork after which a zygote that has forked is replaced: a quiet moment ends its history."""
GONE = (anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError, ConnectionError)


def _import_root(module: str) -> str:
    spec = importlib.util.find_spec(module)
    assert spec is not None and spec.origin is not None, f"{module} is not installed"
    return str(Path(spec.origin).parent.parent)


_PACKAGE = Path(__file__).resolve().parents[1]
"""The sandbox package's folder (this module is sandbox/host/forkserver.py)."""

# -S skips site (and the editable-install finders it loads): the zygote gets exactly the two paths it
# needs. The package is registered by hand so that sandbox/__init__ (anyio, dataclasses: 40 ms of start-up
# the zygote has no use for) is never executed there; sandbox.worker and sandbox.protocol import as usual.
_BOOTSTRAP = (
    "import sys, types\n"
    "sys.path[:0] = {paths!r}\n"
    "package = types.ModuleType('sandbox')\n"
    "package.__path__ = [{package!r}]\n"
    "sys.modules['sandbox'] = package\n"
    "from sandbox.worker.zygote import main\n"
    "main()\n"
).format(
    paths=[str(_PACKAGE.parent), _import_root("RestrictedPython")],
    package=str(_PACKAGE),
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


class _Life:
    """One zygote, from its start to its exit, as the host sees it."""

    def __init__(self) -> None:
        self.control: socket.socket | None = None
        """Set once the zygote said ready."""
        self.process: ZygoteProcess | None = None
        self.workers: dict[int, Worker] = {}
        """By the pid the zygote knows them by, which its exit reports name (each zygote has pids of its own)."""
        self.outstanding: set[int] = set()
        """Ids of the fork requests it was sent and has not answered yet."""
        self.forks = 0
        self.last_fork = anyio.current_time()
        self.settled = anyio.Event()
        """It said ready, or it ended before it did."""
        self.ended = False
        self.retiring = False
        """A fresh zygote took over: this one answers what it was sent, and exits once no worker of it is left."""
        self.nudge = anyio.Event()
        """Wakes the loop that decides when to replace it."""

    def retire_if_done(self) -> None:
        if self.retiring and not self.workers and not self.outstanding and self.control is not None:
            with contextlib.suppress(OSError):
                self.control.shutdown(socket.SHUT_WR)  # the zygote exits; its life ends


class ForkServer:
    """Owns the zygote: starts it, forwards fork requests, routes its replies, restarts it when it dies, and
    replaces it with a fresh one every RECYCLE_FORKS forks and after RECYCLE_IDLE seconds without one. The fresh
    zygote starts in the background and takes over once ready: no fork request waits for it; the old one
    exits once its last worker has."""

    def __init__(self, program: str) -> None:
        self._program = program
        self._current: _Life | None = None
        """The zygote fork requests go to."""
        self._lives: set[_Life] = set()
        self._pending: dict[int, _Fork] = {}
        self._ids = itertools.count()
        self._failure: str | None = None
        self._stopping = anyio.Event()
        self._send_lock = anyio.Lock(fast_acquire=True)
        self._zygotes: anyio.abc.TaskGroup | None = None

    @property
    def process(self) -> ZygoteProcess | None:
        """The zygote fork requests go to, else the one starting."""
        life = self._current or next(iter(self._lives), None)
        return None if life is None else life.process

    async def fork(self, memory_mb: int, cpu_seconds: float, *, prefault: bool = True) -> Worker | SpawnFailure:
        """A worker confined with these limits; with `prefault`, one that took its copy-on-write faults while
        idle (sandbox/worker/_process.py), which a worker wanted at once has no time for."""
        if self._stopping.is_set():
            return SpawnFailure("the sandbox is closing")
        if self._current is None and self._failure is not None:
            return SpawnFailure(self._failure)
        request_id = next(self._ids)
        request = _Fork(memory_mb, cpu_seconds, prefault)
        self._pending[request_id] = request
        try:
            if (life := self._current) is not None:
                await self._send(life, request_id, request)
                life.forks += 1
                life.last_fork = anyio.current_time()
                if life.forks in (1, RECYCLE_FORKS):  # the idle clock starts; or it is time
                    life.nudge.set()
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

    async def _send(self, life: _Life, request_id: int, request: _Fork) -> None:
        fields = {"memory_mb": request.memory_mb, "cpu_seconds": request.cpu_seconds, "prefault": request.prefault}
        data = json.dumps({"id": request_id, **fields})
        assert life.control is not None
        async with self._send_lock:
            while True:
                try:
                    life.control.send(data.encode())
                    life.outstanding.add(request_id)
                    return
                except BlockingIOError:
                    await anyio.wait_writable(life.control)
                except OSError:
                    return  # the zygote is gone; the request stays pending and is sent to its successor

    async def stop(self) -> None:
        """Close the control sockets for writing: each zygote kills and reaps its workers, reports, exits."""
        self._stopping.set()
        for life in self._lives:
            life.nudge.set()
            if life.control is not None:
                with contextlib.suppress(OSError):
                    life.control.shutdown(socket.SHUT_WR)

    async def run(self) -> None:
        async with anyio.create_task_group() as zygotes:
            self._zygotes = zygotes
            while not self._stopping.is_set():
                life = _Life()
                zygotes.start_soon(self._serve_one, life)
                await life.settled.wait()
                if life.control is None and not self._stopping.is_set():
                    current = self._current
                    if current is None:
                        for request in self._pending.values():
                            request.resolve(SpawnFailure(self._failure or "the sandbox fork-server failed to start"))
                        with anyio.move_on_after(_RETRY_DELAY):
                            await self._stopping.wait()
                    else:  # no fresh zygote this time: the current one serves on, and is due again later
                        current.forks, current.last_fork = 0, anyio.current_time()
                        await self._until_due(current)
                    continue
                await self._until_due(life)
        for request in self._pending.values():
            if not request.done.is_set():
                request.resolve(SpawnFailure("the sandbox is closing"))

    async def _until_due(self, life: _Life) -> None:
        """Until `life`, the current zygote, has ended or is due to be replaced (RECYCLE_FORKS, RECYCLE_IDLE)."""
        while not (self._stopping.is_set() or life.ended):
            if life.forks >= RECYCLE_FORKS:
                return
            wait = RECYCLE_IDLE - (anyio.current_time() - life.last_fork) if life.forks else math.inf
            if wait <= 0:
                return
            life.nudge = anyio.Event()
            with anyio.move_on_after(wait):
                await life.nudge.wait()
            if self._current is not life:
                return

    async def _serve_one(self, life: _Life) -> None:
        """One zygote's life. Once ready it takes over from the current zygote, which retires."""
        host_end, zygote_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self._lives.add(life)
        try:
            try:
                argv = [sys.executable, "-I", "-S", "-c", _BOOTSTRAP, str(os.getpid()), self._program]
                process = ZygoteProcess(argv, zygote_end.fileno())
            except OSError as exc:
                self._failure = f"could not start the sandbox fork-server: {exc}"
                return
            finally:
                zygote_end.close()
            life.process = process
            host_end.setblocking(False)
            try:
                started = False
                with anyio.move_on_after(START_TIMEOUT):
                    message, _ = await self._receive(host_end)
                    started = message == {"op": "ready"}
                if not started:
                    self._failure = f"the sandbox fork-server failed to start (exit status {process.returncode})"
                    return
                self._failure = None
                life.control = host_end
                previous, self._current = self._current, life
                life.settled.set()
                if previous is not None:
                    previous.retiring = True
                    previous.retire_if_done()
                if self._stopping.is_set():
                    await self.stop()
                await self._send_unanswered(life)
                while True:
                    message, fds = await self._receive(host_end)
                    self._dispatch(life, message, fds)
                    life.retire_if_done()
            except (*GONE, ProtocolError, OSError):
                return
            finally:
                life.ended = True
                self._lives.discard(life)
                if self._current is life:
                    self._current = None
                life.nudge.set()
                for worker in life.workers.values():
                    worker.exited(None, lost=True)
                life.workers.clear()
                if self._current is not None and self._zygotes is not None:
                    # Requests it never answered go to its successor, already serving.
                    self._zygotes.start_soon(self._send_unanswered, self._current)
                with anyio.CancelScope(shield=True):
                    with anyio.move_on_after(STOP_TIMEOUT if self._stopping.is_set() else 0):
                        await process.wait()
                    if process.returncode is None:
                        process.kill()
                    await process.aclose()
        finally:
            life.settled.set()
            host_end.close()

    async def _send_unanswered(self, life: _Life) -> None:
        """Send `life` every request waiting for a worker that no living zygote was sent."""
        sent = set().union(*(other.outstanding for other in self._lives))
        for request_id, request in list(self._pending.items()):
            if not request.done.is_set() and request_id not in sent:
                await self._send(life, request_id, request)

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

    def _dispatch(self, life: _Life, message: Any, fds: list[int]) -> None:
        op = message.get("op")
        life.outstanding.discard(message.get("id", -1))
        if op == "forked" and len(fds) == 2:
            worker = Worker(fds[1], socket.socket(fileno=fds[0]))
            life.workers[message["pid"]] = worker
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
            exited = life.workers.pop(message["pid"], None)
            if exited is not None:
                exited.exited(message["returncode"])
        elif op == "failed":
            request = self._pending.get(message["id"])
            if request is not None and not request.done.is_set():
                request.resolve(SpawnFailure(f"could not fork a sandbox worker: {message['reason']}"))
