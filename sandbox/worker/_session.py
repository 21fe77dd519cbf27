"""Inside the worker: the pack-call client a snippet talks through.

A pack is a stub whose every public attribute is a tool stub; calling one sends a call frame to the host and
blocks for the reply, whose JSON objects come as Records (sandbox/worker/_record.py: `site.name` reads `site["name"]`).
`parallel()` records several calls, sends them together and collects the replies by
call id; `progress()` sends rate-limited progress frames. The caps (max_calls, calls in flight) are checked
here and again on the host, which trusts nothing the worker says.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from types import CodeType, FunctionType
from typing import Any

from sandbox.protocol.caps import MAX_EXACT_INT, MAX_IN_FLIGHT, MAX_PROGRESS_MESSAGE, PROGRESS_RATE
from sandbox.protocol.channel import ProtocolError, encode
from sandbox.protocol.errors import ORIGINS, TOOL_ERRORS, LimitError, ToolError
from sandbox.worker._fd_channel import FdChannel
from sandbox.worker._jsonable import TooDeep, text_of, to_json
from sandbox.worker._record import Record

__all__ = ["Pack", "Pending", "Session", "Tool"]


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
        self._progress_held: dict[str, Any] | None = None  # the latest report the rate held back

    def call(self, pack: str, tool: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        pending = self._prepare(pack, tool, args, kwargs)
        if self._recording is not None:
            self._recording.append(pending)
            return pending
        self._reserve(1)
        self.send_progress(force=False)  # a step held back is shown while the call runs
        self.channel.send(pending._request)
        outcome = _outcome(self.channel.receive(Record))
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
            reply = self.channel.receive(Record)
            replies[waiting.pop(reply["id"])] = reply
        # Every call has finished before any failure is raised: none is left running behind the snippet's back.
        outcomes = [_outcome(reply) for reply in replies]
        if not return_exceptions:
            for outcome in outcomes:
                if isinstance(outcome, BaseException):
                    raise outcome
        return outcomes

    def progress(self, done: Any, total: Any = None, message: Any = None) -> None:
        """Report progress to the client that asked for the run; at most PROGRESS_RATE a second get through. One
        the rate holds back goes out with the next pack call the rate allows, or at the end of the run: the last
        step (3 of 3) is never lost."""
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
        self._progress_held = report
        self.send_progress(force=False)

    def send_progress(self, *, force: bool) -> None:
        """Send the report held back, if any, when the rate allows it or ``force`` (the run ends)."""
        now = time.monotonic()
        if self._progress_held is None or (not force and now - self._progress_sent < 1 / PROGRESS_RATE):
            return
        self._progress_sent = now
        report, self._progress_held = self._progress_held, None
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
        pending: Pending = recorded[0]  # not narrowed to `value`'s Any by the check above
        return pending

    def _reserve(self, count: int) -> None:
        if self.calls + count > self.max_calls:
            # Remembered: catching it in the snippet does not make the run a success.
            self.limit_error = LimitError(
                f"more than {self.max_calls} pack calls in one run (sandbox.max_calls); batch the work into fewer calls"
            )
            raise self.limit_error
        self.calls += count


def _outcome(reply: Mapping[str, Any]) -> Any:
    """A reply's value, or the error it carries as an exception (not raised), with the server, tool and origin
    the host gave it."""
    if "error" in reply:
        kind = TOOL_ERRORS.get(reply.get("type", ""), ToolError)
        server, tool = (reply[k] if isinstance(reply.get(k), str) else None for k in ("server", "tool"))
        origin: str = reply["origin"] if reply.get("origin") in ORIGINS else "host"
        return kind(reply["error"], server=server, tool=tool, origin=origin)
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


def _progress_number(name: str, value: Any) -> int | float:
    """The number as JSON carries it: an int stays an int (a client shows 3 of 3, not 3.0), a float a float."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"progress() {name} must be a number, not {type(value).__name__}")
    if isinstance(value, int):
        if abs(value) > MAX_EXACT_INT:
            raise ValueError(f"progress() {name} must be at most {MAX_EXACT_INT} in magnitude")
        return int(value)  # an int subclass's own methods never reach the channel
    number = float(value)
    if not math.isfinite(number):
        raise ValueError(f"progress() {name} must be a finite number")
    return number
