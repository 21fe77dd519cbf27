"""The data that crosses the sandbox's public boundary: limits in, results and errors out."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from sandbox.protocol.sites import Site

__all__ = ["RUN_FUNCTIONS", "Limits", "OnCall", "OnProgress", "OnSites", "Origin", "RunError", "RunResult"]

RUN_FUNCTIONS = ("parallel", "progress")
"""The functions a run adds to a snippet's builtins (beside the exceptions of sandbox.protocol.errors): its calls
at once, and its progress."""


@dataclass(frozen=True)
class Limits:
    timeout: float = 30.0
    """Wall-clock seconds per run, counted from the moment a worker takes the job."""
    memory_mb: int = 256
    """Address-space cap of the worker (RLIMIT_AS)."""
    max_calls: int = 200
    """Pack calls per run; the call past the cap fails with LimitError and ends the run."""
    max_output: int = 256 * 1024
    """Bytes of captured print output; the excess is cut, with a note saying how much."""
    cpu_seconds: float | None = None
    """CPU seconds per run (RLIMIT_CPU); None means the same as `timeout`."""
    max_recursion: int = 500
    """Python call depth available to the snippet."""
    max_message: int = 8 * 1024 * 1024
    """Bytes of one JSON message between host and worker (a call's arguments or result, the final value)."""


OnCall = Callable[[str, str, list[Any], dict[str, Any]], Awaitable[Any]]
"""(pack, tool, args, kwargs) -> JSON-able value; runs in a child task of the `Sandbox.run` caller."""

OnProgress = Callable[[float, "float | None", "str | None"], None]
"""(done, total, message) from the snippet's progress(): finite numbers and one short line, checked and
rate-limited by the host. Called on the run's reading loop, so it must not block: queue, don't await."""


OnSites = Callable[[list[Site]], "RunError | None"]
"""The pack calls the snippet's source shows, before it starts -> the error that ends the run, or None to let
it go on. Called on the run's reading loop with at most MAX_SITES sites: bounded work, no awaiting."""


Origin = Literal["host", "tool", "code", "precheck"]
"""Who an error comes from, decided by the host and never read from anything the worker sends:

- "host": the host's own verdict, made where the host creates it: a time, CPU or host-side limit, a crashed or
  lost worker, a broken protocol, a busy sandbox, the code's length. Its kinds are declared once, as `Verdict`
  (sandbox/protocol/verdicts.py).
- "precheck": the caller's mistake, found in the snippet's pack calls (`OnSites`) before any of them was
  answered: an unknown pack or tool, a missing or unknown argument. Nothing ran, so nothing took effect.
- "tool": a pack call failed and the snippet did not catch it: the worker reported exactly an error (kind and
  message) the host itself sent this run in a reply.
- "code": anything else the worker reports, the snippet's own exception. That includes the worker-side limit
  errors (sandbox.max_calls counted in the worker, the output flood, a result too large to send): the worker
  runs the snippet's code, so what it says cannot be told apart from what the snippet raises. The host's own
  checks of the same limits (it counts calls too) are host verdicts.
"""


@dataclass
class RunError:
    type: str
    message: str
    line: int | None = None
    column: int | None = None
    source: str | None = None
    origin: Origin = field(kw_only=True)
    """Every maker of a RunError says whose it is (see Origin): there is no default to forget."""

    @property
    def where(self) -> str:
        """``line 3``, or ``line 2, column 5`` where the column is known (a syntax error, the pre-check's)."""
        return f"line {self.line}" + (f", column {self.column}" if self.column is not None else "")

    def __str__(self) -> str:
        text = f"{self.type}: {self.message}" if self.message else self.type
        if self.line is None:
            return text
        where = self.where
        if self.source and self.source.strip():
            where += f": `{self.source.strip()}`"
        return f"{text} ({where})"


@dataclass
class RunResult:
    value: Any
    output: str
    error: RunError | None
    calls: int
    size: int = 0
    """Bytes of the frame the run's result came in (0 when the run failed before one): big results may be
    worth shaping off the event loop too."""
    head: tuple[str, int] | None = None
    """A value too long to show whole comes as text already cut, in place of `value` (None then): its compact
    JSON's first max(max_output, 1024) characters (a str value's own), and the length of the whole text."""

    @property
    def ok(self) -> bool:
        return self.error is None
