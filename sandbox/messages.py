"""The messages of one run, typed; what the worker sends is checked here once, where it arrives.

Host -> worker: the job (`job_frame`), then one reply per pack call (`reply_frame`).
Worker -> host: `{"op": "ready"}` once confined; then any number of `{"op": "call", ...}`, each waiting
for its reply; then `{"op": "done", ...}`. Anything else is a broken protocol (`ProtocolError`).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

from sandbox.api import Limits, RunError
from sandbox.channel import JOB_CAP, ProtocolError, encode

__all__ = ["MAX_NAME", "REPLY_ENVELOPE", "Call", "Done", "is_ready", "job_frame", "parse", "reply_frame"]

REPLY_ENVELOPE = 4096
"""Bytes around a payload: a reply or result may carry a full max_message payload plus this much."""
MAX_NAME = 128
"""Characters of a pack or tool name, and of an error type."""
MAX_SOURCE = 1000
"""Characters of the snippet line an error names."""


@dataclass(frozen=True, slots=True)
class Call:
    """A pack call the snippet made; the worker waits for its reply."""

    pack: str
    tool: str
    args: list[Any]
    kwargs: dict[str, Any]
    refusal: str | None = None
    """Why the call is answered with an error at once, never reaching on_call (a name that is no name)."""


@dataclass(frozen=True, slots=True)
class Done:
    """How the run ended: a value, or an error; with what it printed."""

    value: Any
    output: str
    error: RunError | None


def job_frame(code: str, packs: Mapping[str, Collection[str]], limits: Limits) -> bytes:
    job = {
        "op": "run",
        "code": code,
        "packs": {name: sorted(tools) for name, tools in packs.items()},
        "limits": {**vars(limits), "cpu_seconds": limits.cpu_seconds or limits.timeout},
    }
    return encode(job, JOB_CAP)


def reply_frame(
    call: Call, value: Any = None, error: str | None = None, kind: str = "ToolError", *, limits: Limits
) -> bytes:
    """The answer to `call`: its value, or an error the snippet raises as `kind` (a TOOL_ERRORS name)."""
    reply = {"value": value} if error is None else {"error": error, "type": kind}
    try:
        return encode(reply, limits.max_message)
    except ProtocolError:
        note = f"the result of {call.pack}.{call.tool} exceeds {limits.max_message} bytes"
    except (TypeError, ValueError) as exc:
        note = f"the result of {call.pack}.{call.tool} is not JSON data: {exc}"
    return encode({"error": note}, REPLY_ENVELOPE)


def is_ready(message: Any) -> bool:
    return message == {"op": "ready"}


def parse(message: Any, limits: Limits) -> Call | Done:
    """A decoded frame from a worker during its run, checked once; `ProtocolError` says what was wrong.
    Text the worker chose is cut to the limits here: output and error message at max_output (plus the
    note the worker adds), the error's source line at MAX_SOURCE, its type at MAX_NAME."""
    op = message.get("op") if isinstance(message, dict) else None
    if op == "call":
        pack, tool, args, kwargs = (message.get(k) for k in ("pack", "tool", "args", "kwargs"))
        if isinstance(pack, str) and isinstance(tool, str) and isinstance(args, list) and isinstance(kwargs, dict):
            return Call(pack, tool, args, kwargs, _name_refusal(pack, tool))
    elif op == "done":
        output, error = message.get("output"), message.get("error")
        if isinstance(output, str) and (error is None or _is_error(error)):
            cut = limits.max_output + 200
            if error is None:
                return Done(message.get("value"), output[:cut], None)
            source = error["source"]
            run_error = RunError(
                error["type"][:MAX_NAME],
                error["message"][:cut],
                error["line"],
                error["column"],
                None if source is None else source[:MAX_SOURCE],
            )
            return Done(None, output[:cut], run_error)
    raise ProtocolError(f"not a {op} message" if op in ("call", "done") else "unexpected message")


def _name_refusal(pack: str, tool: str) -> str | None:
    for kind, name in (("pack", pack), ("tool", tool)):
        if not (len(name) <= MAX_NAME and name.isidentifier()):
            shown = name if len(name) <= 40 else f"{name[:40]}... ({len(name)} characters)"
            return f"{shown!r} is not a {kind} name: names are identifiers of at most {MAX_NAME} characters"
    return None


def _is_error(error: Any) -> bool:
    return (
        isinstance(error, dict)
        and set(error) == {"type", "message", "line", "column", "source"}
        and isinstance(error["type"], str)
        and isinstance(error["message"], str)
        and all(error[k] is None or type(error[k]) is int for k in ("line", "column"))
        and (error["source"] is None or isinstance(error["source"], str))
    )
