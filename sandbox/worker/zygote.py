"""The fork-server: imports everything a worker needs once, then forks a fresh worker per host request.

Started by the host (sandbox/host/_launch.py) as `python -I -S -c <bootstrap> <host pid> <seccomp program, hex>`
with an empty environment, its own session, as the init of a pid namespace of its own where the kernel
allows, and its control socket (AF_UNIX, SOCK_SEQPACKET: one JSON message per
record, so file descriptors ride on the message they belong to) as stdin. It holds no secret and never
runs snippet code (only our constant warm-up job, before its first fork: sandbox.worker._process.warm_up);
it is single-threaded, so a fork copies a consistent interpreter.

Host -> zygote: {"id", "memory_mb", "cpu_seconds", "prefault"}: fork a worker confined with these limits, which
runs the prefault job before it says ready if "prefault" is true.
Zygote -> host: {"op": "ready"} once; {"op": "forked", "id", "pid"} (the pid as the zygote sees it) carrying
two descriptors, the host's end of the worker's channel and a pidfd (so the host can kill it without racing
pid reuse, and learn the pid it knows the worker by);
{"op": "failed", "id", "reason"}; {"op": "exit", "pid", "returncode"} once the zygote has reaped a worker.
End of file on the control socket means shut down: kill and reap every worker, then exit.
"""

from __future__ import annotations

import _socket
import array
import contextlib
import ctypes
import gc
import json
import os
import select
import signal
import sys
import time

from sandbox.worker._process import serve, warm_up
from sandbox.worker.confine import Confinement, confine_fork_server, set_parent_death_signal

__all__ = ["WORKER_NICE", "isolate", "main", "setup"]

_CLONE_NEWUTS = 0x04000000
_CLONE_NEWIPC = 0x08000000
_CLONE_NEWUSER = 0x10000000
_CLONE_NEWNET = 0x40000000
_libc = ctypes.CDLL(None, use_errno=True)


def _enter_user_namespace() -> None:
    """Become root of a user namespace of our own, mapped to the user we are: workers can then chroot and
    drop capabilities that only ever counted inside it. Only possible while single-threaded, as we are."""
    uid, gid = os.getuid(), os.getgid()
    if _libc.unshare(_CLONE_NEWUSER) != 0:
        return
    for name, text in (("setgroups", "deny"), ("uid_map", f"0 {uid} 1"), ("gid_map", f"0 {gid} 1")):
        with open(f"/proc/self/{name}", "w") as file:
            file.write(text)


def isolate() -> None:
    """Namespaces made once, shared by every worker the zygote forks: a network namespace with no device up,
    System V IPC and POSIX queues, a hostname of their own. Each one the kernel refuses is skipped."""
    if os.geteuid() != 0:
        _enter_user_namespace()
    for flag in (_CLONE_NEWNET, _CLONE_NEWIPC):
        _libc.unshare(flag)
    if _libc.unshare(_CLONE_NEWUTS) == 0:
        _socket.sethostname("sandbox")


def setup(program: bytes) -> Confinement:
    """Turn this process, everything imported, into a fork-server whose forks each need only their own
    confinement (sandbox.worker._process.prepare). The one place this is done: the tests' confined runner
    calls it too."""
    # glibc reads /etc/localtime once; a confined worker could not, so every fork inherits it read.
    time.localtime()
    isolate()
    confinement = confine_fork_server(program)
    # After the fork-server's own confinement: the warm-up sees what a worker would (no file, no import).
    warm_up()
    return confinement


_DECODER = json.JSONDecoder()
"""Requests are read with its raw_decode, replies written by hand (below): after each fork, every page the
zygote writes to is copied, and json.loads and json.dumps touch dozens of pages that raw_decode and a bytes
template do not (measured: 200 page faults per fork went to 80, with raw descriptors for the channel)."""


class _Zygote:
    def __init__(self, control: _socket.socket, confinement: Confinement) -> None:
        self.control = control
        self.confinement = confinement
        self.children: dict[int, int] = {}
        """pidfd -> pid of every forked worker not yet reaped."""
        self.poller = select.poll()
        self.poller.register(control, select.POLLIN)

    def send(self, data: bytes, fds: tuple[int, ...] = ()) -> None:
        if fds:
            self.control.sendmsg([data], [(_socket.SOL_SOCKET, _socket.SCM_RIGHTS, array.array("i", fds))])
        else:
            self.control.send(data)

    def loop(self) -> None:
        while True:
            for fd, _ in self.poller.poll():
                if fd != self.control.fileno():
                    self.reap(fd)
                    continue
                data = self.control.recv(4096)
                if not data:
                    self.shutdown()
                request, _ = _DECODER.raw_decode(data.decode())
                self.fork(request["id"], request["memory_mb"], request["cpu_seconds"], request["prefault"])

    def fork(self, request_id: int, memory_mb: int, cpu_seconds: float, prefault: bool) -> None:
        # The C socket type and bare descriptors: socket.socketpair and socket objects run Python (and touch
        # its pages) to make and close them.
        pair = _socket.socketpair(_socket.AF_UNIX, _socket.SOCK_STREAM)
        host_end, worker_end = pair[0].detach(), pair[1].detach()
        try:
            pid = os.fork()
        except OSError as exc:
            os.close(host_end)
            os.close(worker_end)
            failed = {"op": "failed", "id": request_id, "reason": f"fork failed: {exc}"}
            self.send(json.dumps(failed).encode())
            return
        if pid == 0:
            try:
                serve(worker_end, self.confinement, memory_mb, cpu_seconds, os.getppid(), prefault=prefault)
            finally:
                os._exit(1)
        os.close(worker_end)
        pidfd = os.pidfd_open(pid)
        self.children[pidfd] = pid
        self.poller.register(pidfd, select.POLLIN)
        self.send(b'{"op": "forked", "id": %d, "pid": %d}' % (request_id, pid), (host_end, pidfd))
        os.close(host_end)

    def reap(self, pidfd: int) -> None:
        pid = self.children.pop(pidfd)
        self.poller.unregister(pidfd)
        os.close(pidfd)
        _, status = os.waitpid(pid, 0)
        self.send(b'{"op": "exit", "pid": %d, "returncode": %d}' % (pid, os.waitstatus_to_exitcode(status)))

    def shutdown(self) -> None:
        for pidfd in self.children:
            signal.pidfd_send_signal(pidfd, signal.SIGKILL)
        for pid in self.children.values():
            os.waitpid(pid, 0)
        os._exit(0)


WORKER_NICE = 10
"""How much lower the scheduler ranks the fork-server and its workers than the host."""


def main() -> None:
    host_pid = int(sys.argv[1])
    set_parent_death_signal(host_pid)
    # Workers (forked from here, so they inherit both) yield the CPU to the host: however many snippets burn
    # their CPU at once, the event loop that answers every client runs first. SCHED_BATCH adds that a woken worker
    # (given a job or a pack call's answer, or killed) never preempts the task running on its CPU: it waits for it
    # to block or use up its slice, so the host is not cut off mid-answer by the process it just woke.
    os.nice(WORKER_NICE)
    # A platform that refuses the policy costs the host some latency, never the sandbox.
    with contextlib.suppress(OSError):
        os.sched_setscheduler(0, os.SCHED_BATCH, os.sched_param(0))
    control = _socket.socket(fileno=os.dup(0))
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    os.close(devnull)
    confinement = setup(bytes.fromhex(sys.argv[2]))
    # Everything imported so far is shared copy-on-write with every worker; keep the collector off it.
    gc.freeze()
    zygote = _Zygote(control, confinement)
    zygote.send(b'{"op": "ready"}')
    try:
        zygote.loop()
    except (OSError, ValueError, KeyError, TypeError):
        # The host went away mid-message, or sent nonsense: take every worker down with us.
        zygote.shutdown()


if __name__ == "__main__":
    main()
