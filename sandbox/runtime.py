"""Inside the worker, after confinement: run one snippet and describe how it ended, as JSON data."""

from __future__ import annotations

import builtins
import math
import sys
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from types import CodeType, FunctionType
from typing import Any

from sandbox.channel import FdChannel, ProtocolError, encode
from sandbox.errors import TOOL_ERRORS, LimitError, PolicyError, ToolError
from sandbox.guards import make_globals, make_guards
from sandbox.jsonable import TooDeep, text_of, to_json
from sandbox.messages import MAX_IN_FLIGHT, MAX_PROGRESS_MESSAGE, PROGRESS_RATE
from sandbox.policy import FILENAME, RESULT_NAME, CompileFailure, compile_restricted

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


class Tool:
    """A pack tool stub: calling it is a request to the host, answered before the snippet goes on."""

    def __init__(self, pack: str, name: str, call: Callable[[str, str, tuple[Any, ...], dict[str, Any]], Any]):
        self._pack = pack
        self._name = name
        self._call = call

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._call(self._pack, self._name, args, kwargs)

    def __repr__(self) -> str:
        return f"<tool {self._pack}.{self._name}>"


class Pack:
    """A pack stub: every public attribute is a tool stub, listed or not (the host knows what exists)."""

    def __init__(self, name: str, tools: Collection[str], call: Callable[..., Any]) -> None:
        self._name = name
        self._tools = sorted(tools)
        self._call = call

    def __getattr__(self, name: str) -> Tool:
        if name.startswith("_"):
            raise AttributeError(name)
        return Tool(self._name, name, self._call)

    def __dir__(self) -> list[str]:
        return list(self._tools)

    def __repr__(self) -> str:
        return f"<pack {self._name}: {', '.join(self._tools)}>"


class Pending:
    """What a pack call returns while parallel() collects its calls: the call is made later, with the others."""

    def __init__(self, call_id: int, request: dict[str, Any]) -> None:
        self._id = call_id
        self._request = request

    def _not_yet(self, *args: Any) -> Any:
        raise TypeError(
            "a pack call inside parallel() has no result yet: give parallel() callables that only make the "
            "call, like `lambda: pack.tool(x=1)`, and work with the list of results it returns"
        )

    __getattr__ = __getitem__ = __iter__ = __len__ = __bool__ = __contains__ = _not_yet

    def __repr__(self) -> str:
        return f"<pending call {self._request['pack']}.{self._request['tool']}>"


class Session:
    """One run's pack calls over the channel, with the max_calls cap; parallel() and progress() too.

    Every call carries an id the host echoes in its reply. A plain call sends one frame and waits for its
    reply; parallel() first runs each of its callables with calls recorded instead of sent (snippet code
    never runs concurrently: the worker has one thread), then keeps up to MAX_IN_FLIGHT of them waiting
    on the host at once and matches the replies by id.
    """

    def __init__(self, channel: FdChannel, max_calls: int) -> None:
        self.channel = channel
        self.max_calls = max_calls
        self.calls = 0
        self.limit_error: LimitError | None = None
        self._next_id = 0
        self._recording: list[Pending] | None = None
        self._progress_sent = -math.inf

    def call(self, pack: str, tool: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        pending = self._prepare(pack, tool, args, kwargs)
        if self._recording is not None:
            self._recording.append(pending)
            return pending
        self._reserve(1)
        self.channel.send(pending._request)
        outcome = _outcome(self.channel.receive())
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome

    def parallel(self, *calls: Any, return_exceptions: bool = False) -> list[Any]:
        """parallel(lambda: a.x(), lambda: b.y(k=1), ...) or parallel([...]): the results, in order."""
        if self._recording is not None:
            raise TypeError("parallel() cannot be used inside parallel(): pass all the calls to one parallel()")
        if len(calls) == 1 and isinstance(calls[0], list | tuple):
            calls = tuple(calls[0])
        if self.calls + len(calls) > self.max_calls:
            self._reserve(len(calls))  # raises, and remembers, the LimitError
        pendings = [self._record(index, call) for index, call in enumerate(calls)]
        _check_late_binding(calls, pendings)
        self._reserve(len(pendings))
        replies: list[Any] = [None] * len(pendings)
        waiting: dict[int, int] = {}
        sent = 0
        while sent < len(pendings) or waiting:
            while sent < len(pendings) and len(waiting) < MAX_IN_FLIGHT:
                waiting[pendings[sent]._id] = sent
                self.channel.send(pendings[sent]._request)
                sent += 1
            reply = self.channel.receive()
            replies[waiting.pop(reply["id"])] = reply
        # Every call has finished before any failure is raised: none is left running behind the snippet's back.
        outcomes = [_outcome(reply) for reply in replies]
        if not return_exceptions:
            for outcome in outcomes:
                if isinstance(outcome, BaseException):
                    raise outcome
        return outcomes

    def progress(self, done: Any, total: Any = None, message: Any = None) -> None:
        """Report progress to the client that asked for the run; at most PROGRESS_RATE a second get through."""
        report = {
            "op": "progress",
            "done": _progress_number("done", done),
            "total": None if total is None else _progress_number("total", total),
            "message": None,
        }
        if message is not None:
            if not isinstance(message, str):
                raise TypeError(f"progress() message must be a str, not {type(message).__name__}")
            report["message"] = text_of(message)[:MAX_PROGRESS_MESSAGE]
        now = time.monotonic()
        if now - self._progress_sent < 1 / PROGRESS_RATE:
            return
        self._progress_sent = now
        self.channel.send(report)

    def _prepare(self, pack: str, tool: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Pending:
        """The call's frame, checked for size now: a batch fails before any of it is sent, never halfway."""
        try:
            request = {
                "op": "call",
                "id": self._next_id,
                "pack": pack,
                "tool": tool,
                "args": to_json(list(args)),
                "kwargs": {str(k): to_json(v) for k, v in kwargs.items()},
            }
            encode(request, self.channel.max_size)
        except (ProtocolError, TooDeep) as exc:
            raise LimitError(f"the arguments of {pack}.{tool} cannot be sent: {exc} (sandbox.max_message)") from None
        self._next_id += 1
        return Pending(request["id"], request)

    def _record(self, index: int, call: Any) -> Pending:
        if not callable(call):
            raise TypeError(
                f"parallel() takes callables such as `lambda: pack.tool(x=1)`; item {index} is a "
                f"{text_of(type(call).__name__)}"
            )
        recorded: list[Pending] = []
        self._recording = recorded
        try:
            value = call()
        finally:
            self._recording = None
        if len(recorded) != 1 or value is not recorded[0]:
            raise TypeError(
                f"parallel() item {index} made {len(recorded)} pack calls; each item must make exactly one and "
                "return its result, like `lambda: pack.tool(x=1)`: work with the results parallel() returns"
            )
        return recorded[0]

    def _reserve(self, count: int) -> None:
        if self.calls + count > self.max_calls:
            # Remembered: catching it in the snippet does not make the run a success.
            self.limit_error = LimitError(
                f"more than {self.max_calls} pack calls in one run (sandbox.max_calls); batch the work into fewer calls"
            )
            raise self.limit_error
        self.calls += count


def _outcome(reply: Mapping[str, Any]) -> Any:
    """A reply's value, or the error it carries as an exception (not raised)."""
    if "error" in reply:
        return TOOL_ERRORS.get(reply.get("type"), ToolError)(reply["error"])
    return reply["value"]


def _check_late_binding(calls: Sequence[Any], pendings: list[Pending]) -> None:
    """Lambdas made in a loop all see the loop variable's last value, so they make one call many times over:
    the classic mistake, refused rather than run."""
    by_code: dict[CodeType, list[int]] = {}
    for index, call in enumerate(calls):
        if isinstance(call, FunctionType):
            by_code.setdefault(call.__code__, []).append(index)
    for indexes in by_code.values():
        requests = [{k: v for k, v in pendings[i]._request.items() if k != "id"} for i in indexes]
        if len(requests) > 1 and all(r == requests[0] for r in requests):
            raise TypeError(
                f"parallel(): the {len(requests)} items made by one lambda all call "
                f"{requests[0]['pack']}.{requests[0]['tool']} with the same arguments. Usually that is a lambda "
                "made in a loop, which sees the loop variable's last value: bind it as a default, "
                "`parallel([lambda u=u: pack.tool(url=u) for u in urls])`"
            )


def _progress_number(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"progress() {name} must be a number, not {type(value).__name__}")
    try:
        number = float(value)
    except OverflowError:
        number = math.inf
    if not math.isfinite(number):
        raise ValueError(f"progress() {name} must be a finite number")
    return number


def _call_depth() -> int:
    depth, frame = 0, sys._getframe()
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
        code: CodeType = compile_restricted(code_text, make_guards(print_factory), packs)
    except CompileFailure as failure:
        return done(None, _error(failure.type, failure.message, failure.line, failure.column, lines))
    except Exception as exc:  # a policy bug must cost this run, never the worker
        return done(
            None, _error("SyntaxError", f"the code cannot be compiled ({type(exc).__name__})", None, None, lines)
        )

    namespace = make_globals(packs)
    namespace["__builtins__"].update(parallel=session.parallel, progress=session.progress)

    sys.setrecursionlimit(_call_depth() + limits["max_recursion"] + 10)
    error = None
    try:
        exec(code, namespace)
    except BaseException as exc:  # SystemExit and KeyboardInterrupt too: the snippet ends, the worker reports
        error = describe(exc, lines, limits)
        del exc
    for limit_error in (session.limit_error, output.limit_error):
        if limit_error is not None:
            error = describe(limit_error, lines, limits)
    if error is not None:
        namespace.clear()
        return done(None, error)
    try:
        return done(to_json(namespace.get(RESULT_NAME)), None)
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
