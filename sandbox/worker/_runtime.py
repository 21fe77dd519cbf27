"""Inside the worker, after confinement: run one snippet and describe how it ended, as JSON data."""

from __future__ import annotations

import builtins
import sys
from collections.abc import Mapping
from types import CodeType, FrameType
from typing import Any

from sandbox.protocol.errors import LimitError, PolicyError
from sandbox.worker._call_sites import call_sites
from sandbox.worker._fd_channel import FdChannel
from sandbox.worker._guards import make_globals, make_guards
from sandbox.worker._jsonable import TooDeep, text_of, to_json
from sandbox.worker._result import text_head
from sandbox.worker._session import Pack, Session
from sandbox.worker.policy import FILENAME, RESULT_NAME, CompileFailure, compile_restricted, parse

__all__ = ["OUTPUT_FLOOD_FACTOR", "Output", "PrintCollector", "describe", "oversized", "run_job"]

OUTPUT_FLOOD_FACTOR = 4
"""Printing this many times `max_output` ends the run: nobody reads that much, and it is usually a loop."""


class Output:
    """Captured print output, cut at `limit` bytes."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.parts: list[str] = []
        self.size = 0
        self.cut = 0
        self.limit_error: LimitError | None = None

    def write(self, text: str) -> int:
        # print() passes `sep`, `end` and str() results, which may be str subclasses with the snippet's methods.
        text = text_of(text)
        size = len(text.encode("utf-8", "surrogatepass"))
        room = self.limit - self.size
        if size <= room:
            self.parts.append(text)
            self.size += size
        else:
            if room > 0:
                self.parts.append(text.encode("utf-8", "surrogatepass")[:room].decode("utf-8", "ignore"))
                self.size = self.limit
            self.cut += size - max(room, 0)
            if self.size + self.cut > OUTPUT_FLOOD_FACTOR * self.limit:
                self.limit_error = LimitError(
                    f"the snippet printed more than {OUTPUT_FLOOD_FACTOR} x {self.limit} bytes "
                    "(sandbox.max_output); print less, or return the data as the value"
                )
                raise self.limit_error
        return len(text)

    def flush(self) -> None:
        """print(flush=True) calls this; there is nothing to flush."""

    def text(self) -> str:
        text = "".join(self.parts)
        if self.cut:
            text += f"\n[... {self.cut} more bytes of output cut: sandbox.max_output is {self.limit} bytes]\n"
        return text


class PrintCollector:
    """What RestrictedPython's rewritten `print(...)` calls; all collectors of a run share one Output."""

    def __init__(self, output: Output) -> None:
        self._output = output

    def _call_print(self, *objects: Any, **kwargs: Any) -> None:
        if kwargs.get("file") is not None:
            raise PolicyError("print(file=...) is not supported: print to the output, or return data as the value")
        builtins.print(*objects, **kwargs, file=self._output)

    def __call__(self) -> str:
        return "".join(self._output.parts)


def _call_depth() -> int:
    depth = 0
    frame: FrameType | None = sys._getframe()
    while frame is not None:
        depth, frame = depth + 1, frame.f_back
    return depth


def describe(exc: BaseException, lines: list[str], limits: Mapping[str, Any]) -> dict[str, Any]:
    """Type, message and the snippet line where it happened; no frames of ours."""
    line = None
    tb = exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == FILENAME:
            line = tb.tb_lineno
        tb = tb.tb_next
    kind = text_of(type(exc).__name__)
    message = _message(exc)
    if isinstance(exc, MemoryError):
        message = f"out of memory: the run exceeded the {limits['memory_mb']} MB memory limit (sandbox.memory_mb)"
    elif isinstance(exc, RecursionError):
        message = f"{message} (the sandbox allows {limits['max_recursion']} nested calls: sandbox.max_recursion)"
    elif isinstance(exc, KeyError):
        message = f"key {message} not found"
    elif isinstance(exc, AttributeError) and type(exc.obj) is dict and isinstance(exc.name, str):
        message = f"{message}; a dict's keys read as d[{exc.name!r}]"
    return _error(kind, message, line, None, lines)


def _message(exc: BaseException) -> str:
    """str(exc) runs the snippet's __str__, which may raise anything (SystemExit too), recurse, or return a
    str subclass: whatever it does, it is the snippet's error, reported, never the worker's crash."""
    try:
        return text_of(str(exc))
    except BaseException as failure:
        return f"(the message could not be read: its __str__ raised {text_of(type(failure).__name__)})"


def _error(kind: str, message: str, line: int | None, column: int | None, lines: list[str]) -> dict[str, Any]:
    source = lines[line - 1] if line is not None and 0 < line <= len(lines) else None
    return {"type": kind, "message": message, "line": line, "column": column, "source": source}


def run_job(job: Mapping[str, Any], channel: FdChannel) -> dict[str, Any]:
    """Compile and execute one snippet; the reply for the host (op "done")."""
    limits = job["limits"]
    code_text: str = job["code"]
    lines = code_text.splitlines()
    output = Output(limits["max_output"])
    session = Session(channel, limits["max_calls"])
    packs = {name: Pack(name, tools, session.call) for name, tools in job["packs"].items()}

    def done(value: Any, error: dict[str, Any] | None) -> dict[str, Any]:
        return {"op": "done", "value": value, "output": output.text(), "error": error}

    def print_factory(_getattr: Any = None) -> PrintCollector:
        return PrintCollector(output)

    try:
        tree = parse(code_text)
        sites = call_sites(tree, packs)
        if sites:
            # Not waited on: the host reads it before any pack call and ends the run if a site is wrong.
            channel.send({"op": "sites", "sites": sites})
        code: CodeType = compile_restricted(tree, make_guards(print_factory), packs)
    except CompileFailure as failure:
        return done(None, _error(failure.type, failure.message, failure.line, failure.column, lines))
    except Exception as exc:  # a policy bug must cost this run, never the worker
        return done(
            None, _error("SyntaxError", f"the code cannot be compiled ({type(exc).__name__})", None, None, lines)
        )

    namespace = make_globals(packs, own_builtins=False)
    namespace["__builtins__"].update(parallel=session.parallel, progress=session.progress)

    sys.setrecursionlimit(_call_depth() + limits["max_recursion"] + 10)
    error = None
    try:
        exec(code, namespace)
    except BaseException as exc:  # SystemExit and KeyboardInterrupt too: the snippet ends, the worker reports
        error = describe(exc, lines, limits)
        del exc
    session.send_progress(force=True)  # the last step the rate held back
    for limit_error in (session.limit_error, output.limit_error):
        if limit_error is not None:
            error = describe(limit_error, lines, limits)
    if error is not None:
        namespace.clear()
        return done(None, error)
    try:
        value = to_json(namespace.get(RESULT_NAME))
        head = text_head(value, limits["max_output"])
        if head is None:
            return done(value, None)
        return {**done(None, None), "text": head[0], "length": head[1]}
    except TooDeep as exc:
        return done(None, _error("LimitError", str(exc), None, None, lines))
    except BaseException as exc:
        return done(None, describe(exc, lines, limits))


def oversized(reply: Mapping[str, Any], max_message: int) -> dict[str, Any]:
    """The reply to send when the real one exceeds the message cap."""
    return {
        "op": "done",
        "value": None,
        "output": reply["output"][: max_message // 2],
        "error": {
            "type": "LimitError",
            "message": f"the result is larger than {max_message} bytes (sandbox.max_message); return less data",
            "line": None,
            "column": None,
            "source": None,
        },
    }
