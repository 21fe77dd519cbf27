"""The messages of one run, typed; what the worker sends is checked here once, where it arrives.

Host -> worker: the job (`job_frame`), then one reply per pack call (`reply_frame`), carrying the call's id.
Worker -> host: `{"op": "ready"}` once confined; then, when the code shows pack calls, one
`{"op": "sites", "sites": [...]}` before the snippet starts (sandbox/protocol/sites.py); then any number of
`{"op": "call", "id": n, ...}` (up to MAX_IN_FLIGHT of them waiting for their replies at once, which may
come back in any order) and `{"op": "progress", ...}` (no reply); then `{"op": "done", ...}`. Anything else
is a broken protocol (`ProtocolError`).
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any, cast

from sandbox.protocol.api import Limits, RunError
from sandbox.protocol.caps import MAX_EXACT_INT, MAX_PROGRESS_MESSAGE
from sandbox.protocol.channel import JOB_CAP, ProtocolError, encode
from sandbox.protocol.errors import ORIGINS, ToolError
from sandbox.protocol.shaping import MIN_SHOWN
from sandbox.protocol.sites import MAX_SITE_NAMES, MAX_SITES, Site, is_site

__all__ = [
    "MAX_CALL_ID",
    "MAX_NAME",
    "REPLY_ENVELOPE",
    "Call",
    "Done",
    "Progress",
    "Ration",
    "SentErrors",
    "Sites",
    "is_ready",
    "job_frame",
    "one_line",
    "parse",
    "reply_frame",
]

REPLY_ENVELOPE = 4096
"""Bytes around a payload: a reply or result may carry a full max_message payload plus this much."""
MAX_NAME = 128
"""Characters of a pack or tool name, and of an error type."""
MAX_SOURCE = 1000
"""Characters of the snippet line an error names."""
MAX_CALL_ID = 2**31 - 1
"""Call ids are ints from 0 to this; a run makes far fewer calls (sandbox.max_calls)."""


class Ration:
    """A token bucket: ``take(now)`` is true for at most ``rate`` events a second, in bursts of up to ``rate``."""

    def __init__(self, rate: float) -> None:
        self._rate = rate
        self._tokens = float(rate)
        self._at = -math.inf

    def take(self, now: float) -> bool:
        self._tokens = min(self._rate, self._tokens + (now - self._at) * self._rate)
        self._at = now
        if self._tokens < 1:
            return False
        self._tokens -= 1
        return True


_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]+")
_SURROGATE = re.compile(r"[\ud800-\udfff]")


def text_cap(limits: Limits) -> int:
    """Characters of the output and of the error message a worker's Done may carry: max_output, plus the note
    the worker adds when it cuts."""
    return limits.max_output + 200


class SentErrors:
    """The pack-call errors (kind, message) the host sent one run in its replies, as digests.

    When the worker reports exactly one of them as how the run ended, a pack call failed and the snippet did
    not catch it: origin "tool". The snippet can match one only by re-raising an error the host sent it, which
    says the same. A message is taken as the worker will report it (cut at `text_cap`, a lone surrogate as
    U+FFFD, as sandbox/host/_untrusted.py decodes it); one digest per reply, and the host answers at most
    sandbox.max_calls calls per run, so the set is bounded by that.
    """

    def __init__(self, limits: Limits) -> None:
        self._cut = text_cap(limits)
        self._digests: set[bytes] = set()

    def add(self, kind: str, message: str) -> None:
        self._digests.add(self._digest(kind, message))

    def __contains__(self, error: RunError) -> bool:
        return bool(self._digests) and self._digest(error.type, error.message) in self._digests

    def _digest(self, kind: str, message: str) -> bytes:
        text = _SURROGATE.sub("\ufffd", f"{kind}\0{message[: self._cut]}")
        return hashlib.blake2b(text.encode("utf-8"), digest_size=16).digest()


@dataclass(frozen=True, slots=True)
class Call:
    """A pack call the snippet made; the worker waits for its reply."""

    pack: str
    tool: str
    args: list[Any]
    kwargs: dict[str, Any]
    refusal: str | None = None
    """Why the call is answered with an error at once, never reaching on_call (a name that is no name)."""
    id: int | None = None
    """Echoed in the reply so the worker can match replies to calls; None from a worker that sends none."""


@dataclass(frozen=True, slots=True)
class Progress:
    """The snippet's own progress report (progress(done, total, message)); it gets no reply."""

    done: int | float
    total: int | float | None
    message: str | None


@dataclass(frozen=True, slots=True)
class Sites:
    """The pack calls the snippet's source shows (sandbox/protocol/sites.py), sent before it starts; no reply."""

    sites: list[Site]


@dataclass(frozen=True, slots=True)
class Done:
    """How the run ended: a value, or an error; with what it printed."""

    value: Any
    output: str
    error: RunError | None
    head: tuple[str, int] | None = None
    """A large value the worker sent cut (sandbox/worker/_result.py): the head of its text, the text's length."""


def job_frame(code: str, packs: Mapping[str, Collection[str]], limits: Limits) -> bytes:
    job = {
        "op": "run",
        "code": code,
        "packs": {name: sorted(tools) for name, tools in packs.items()},
        "limits": {**vars(limits), "cpu_seconds": limits.cpu_seconds or limits.timeout},
    }
    return encode(job, JOB_CAP)


def reply_frame(
    call: Call,
    value: Any = None,
    error: ToolError | None = None,
    kind: str = "ToolError",
    *,
    limits: Limits,
    sent: SentErrors,
) -> bytes:
    """The answer to `call`: its value, or `error`, which the snippet raises as `kind` (a TOOL_ERRORS name) with
    its server, the call's tool and its origin. Every error answered is added to `sent`."""
    if error is None:
        reply: dict[str, Any] = {"value": value}
    else:
        message = str(error) or type(error).__name__
        reply = {"error": message, "type": kind, **_about(call, error.server, error.origin)}
    if call.id is not None:
        reply["id"] = call.id
    try:
        frame = encode(reply, limits.max_message)
    except ProtocolError:
        note = f"the result of {call.pack}.{call.tool} exceeds {limits.max_message} bytes"
    except (TypeError, ValueError) as exc:
        note = f"the result of {call.pack}.{call.tool} is not JSON data: {exc}"
    else:
        if error is not None:
            sent.add(kind, reply["error"])
        return frame
    sent.add("ToolError", note)
    envelope = {"error": note, "type": "ToolError", "id": call.id, **_about(call, None, "host")}
    return encode(envelope, REPLY_ENVELOPE)


def _about(call: Call, server: Any, origin: Any) -> dict[str, Any]:
    """Which call an error reply is about and whose failure it is, as the worker's ToolError carries it."""
    return {
        "server": server[:MAX_NAME] if isinstance(server, str) else None,
        "tool": call.tool[:MAX_NAME],
        "origin": origin if origin in ORIGINS else "host",
    }


def is_ready(message: Any) -> bool:
    return isinstance(message, dict) and message == {"op": "ready"}


def parse(message: Any, limits: Limits) -> Call | Progress | Sites | Done:
    """A decoded frame from a worker during its run, checked once; `ProtocolError` says what was wrong.
    Text the worker chose is cut to the limits here: output and error message at max_output (plus the
    note the worker adds), the error's source line at MAX_SOURCE, its type at MAX_NAME."""
    op = message.get("op") if isinstance(message, dict) else None
    if op == "call":
        pack, tool, args, kwargs = (message.get(k) for k in ("pack", "tool", "args", "kwargs"))
        call_id = message.get("id")
        if (
            isinstance(pack, str)
            and isinstance(tool, str)
            and isinstance(args, list)
            and isinstance(kwargs, dict)
            and (call_id is None or (type(call_id) is int and 0 <= call_id <= MAX_CALL_ID))
        ):
            return Call(pack, tool, args, kwargs, _name_refusal(pack, tool), call_id)
    elif op == "progress":
        done, total, text = message.get("done"), message.get("total"), message.get("message")
        if (
            set(message) == {"op", "done", "total", "message"}
            and _is_number(done)
            and (total is None or _is_number(total))
            and (text is None or isinstance(text, str))
        ):
            message_text = None if text is None else one_line(text, MAX_PROGRESS_MESSAGE) or None
            return Progress(done, total, message_text)  # an int stays an int: a client shows 3 of 3
    elif op == "sites":
        sites = message.get("sites")
        if (
            set(message) == {"op", "sites"}
            and isinstance(sites, list)
            and len(sites) <= MAX_SITES
            and all(is_site(site) for site in sites)
            and sum(len(site[3] or ()) for site in sites) <= MAX_SITE_NAMES
        ):
            return Sites([cast(Site, tuple(site)) for site in sites])
    elif op == "done":
        output, error = message.get("output"), message.get("error")
        if isinstance(output, str) and (error is None or _is_error(error)):
            cut = text_cap(limits)
            if error is None:
                return Done(message.get("value"), output[:cut], None, _head(message, limits))
            source = error["source"]
            run_error = RunError(
                error["type"][:MAX_NAME],
                error["message"][:cut],
                error["line"],
                error["column"],
                None if source is None else source[:MAX_SOURCE],
                origin="code",  # at most the snippet's own: the host alone may make it more (sandbox/host/_run.py)
            )
            return Done(None, output[:cut], run_error)
    raise ProtocolError(f"not a {op} message" if op in ("call", "progress", "sites", "done") else "unexpected message")


def _head(message: dict[str, Any], limits: Limits) -> tuple[str, int] | None:
    """The head of a cut value's text a Done carries, checked; None for a Done that carries the value itself."""
    if "text" not in message:
        return None
    text, length = message["text"], message.get("length")
    shown = max(limits.max_output, MIN_SHOWN)
    if (
        message.get("value") is None
        and isinstance(text, str)
        and len(text) <= shown
        and type(length) is int
        and len(text) <= length <= MAX_EXACT_INT
    ):
        return text, length
    raise ProtocolError("not a done message")


def one_line(text: str, limit: int) -> str:
    """`text` as a client may show it in a status line: control characters and line breaks become spaces, a
    lone surrogate (which no UTF-8 writer takes) a question mark; cut at `limit` characters."""
    line = _CONTROL.sub(" ", text[: limit * 2]).strip()[:limit]
    return line.encode("utf-8", "replace").decode("utf-8")


def _is_number(value: Any) -> bool:
    """A finite float, or an int a float holds (decoding turned NaN and infinities into strings; bool is no
    number here)."""
    if type(value) is int:
        return abs(value) <= MAX_EXACT_INT
    return type(value) is float and math.isfinite(value)


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
