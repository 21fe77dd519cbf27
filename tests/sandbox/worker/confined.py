"""Run plain Python (real builtins, no language layer) in a worker confined exactly like a production one.

The OS layer must hold on its own. Production has no switch to turn the language layer off, so this
builds such a worker itself from the production parts: it is started by the same launcher as the
zygote (sandbox.host._launch.spawn), sets itself up as the zygote does (sandbox.worker.zygote.setup: the same namespaces
and the layers every fork inherits), and its child confines itself with the one function every production
worker calls (sandbox.worker._process.prepare). Only then does it
run the payload, and report how it ended as JSON on a pipe.
"""

from __future__ import annotations

import json
import os
import select
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sandbox.host._seccomp import compile_filter

_ROOT = str(Path(__file__).resolve().parents[3])
_REPORT_CAP = 1 << 16
_ALLOW_EVERYTHING = bytes([0x06, 0, 0, 0, 0, 0, 0xFF, 0x7F])
"""A seccomp program of one instruction, `return SECCOMP_RET_ALLOW`: every other layer, on its own."""
_BOOTSTRAP = f"import sys\nsys.path.insert(0, {_ROOT!r})\nfrom tests.sandbox.worker.confined import main\nmain()\n"


@dataclass(frozen=True)
class Outcome:
    """How a payload ended: its last expression's value, or the exception it raised, or the signal it died of."""

    value: Any = None
    error: str | None = None
    errno: int | None = None
    message: str = ""
    died: int | None = None


def run_confined(code: str, *, as_user: int | None = None, seccomp: bool = True, timeout: float = 30.0) -> Outcome:
    """Run `code` confined; `as_user` starts the fork-server as that unprivileged user, like a non-root gateway;
    without `seccomp` the worker has every other layer, to show what they stop on their own."""
    from sandbox.host._launch import spawn

    read_fd, write_fd = os.pipe()
    program = compile_filter() if seccomp else _ALLOW_EVERYTHING
    argv = [sys.executable, "-I", "-c", _BOOTSTRAP, program.hex(), code]
    if as_user is not None:
        argv = ["setpriv", f"--reuid={as_user}", f"--regid={as_user}", "--clear-groups", *argv]
    try:
        process = spawn(argv, write_fd)
    finally:
        os.close(write_fd)
    try:
        report = _read_all(read_fd, timeout)
        process.wait(timeout)
    finally:
        os.close(read_fd)
        process.kill()
        process.wait()
    if not report and as_user is not None:
        # The stand-in never started: pyenv's interpreters live under /root (0700) on this project's machines.
        raise AssertionError(f"user {as_user} cannot start {sys.executable}: its folders need o+x (see .ci/run)")
    return Outcome(**json.loads(report))


def _read_all(fd: int, timeout: float) -> bytes:
    deadline = time.monotonic() + timeout
    chunks = []
    while chunk := (os.read(fd, _REPORT_CAP) if select.select([fd], [], [], deadline - time.monotonic())[0] else b""):
        chunks.append(chunk)
    return b"".join(chunks)


def main() -> None:
    """In the fork-server stand-in: `argv` is the seccomp program (hex) and the payload; fd 0 the report pipe."""
    # What payloads use, imported while that is still possible: their attempts must reach the kernel,
    # not stop early at an import that cannot read its source.
    import ctypes  # noqa: F401
    import gc  # noqa: F401
    import resource  # noqa: F401
    import signal  # noqa: F401
    import socket  # noqa: F401
    import subprocess  # noqa: F401
    import threading  # noqa: F401

    from sandbox.worker._process import prepare
    from sandbox.worker.zygote import setup

    program, code = bytes.fromhex(sys.argv[1]), sys.argv[2]
    confinement = setup(program)
    report = os.dup(0)
    pid = os.fork()
    if pid == 0:
        try:
            prepare(report, confinement, 256, 10.0, os.getppid())
            os.write(report, json.dumps(_evaluate(code), default=repr).encode())
            os._exit(0)
        finally:
            os._exit(1)
    os.close(report)
    _, status = os.waitpid(pid, 0)
    if status:
        os.write(0, json.dumps({"died": os.waitstatus_to_exitcode(status)}).encode())


def _evaluate(code: str) -> dict[str, Any]:
    """Run the payload as a module; the value of its last line if that is an expression."""
    import ast

    tree = ast.parse(code)
    last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
    namespace: dict[str, Any] = {"__name__": "__main__"}
    try:
        exec(compile(tree, "<payload>", "exec"), namespace)
        value = eval(compile(ast.Expression(last.value), "<payload>", "eval"), namespace) if last else None
    except BaseException as exc:
        return {"error": type(exc).__name__, "errno": getattr(exc, "errno", None), "message": str(exc)}
    return {"value": value}
