"""The static check of a snippet's pack calls, before it runs.

The host never parses snippet code: that is snippet-sized work, which the worker does under the run's own
limits (sandbox/sites.py). The worker lists every ``pack.tool(...)`` call its source shows; here each is
checked against the registry: an unknown pack or tool, or an unknown or missing argument, ends the run with
what exists instead, before any call is answered. Such an error is the caller's mistake, not a fault of the host:
its origin is ``precheck`` (in the result, the run's log record and ``onetool_runs_total``), which also tells the
caller that nothing ran. Calls to a server that is not connected, or that an operator holds for review, are left
to the run, where they raise a catchable ToolUnavailable. All of it is bounded by the sites frame's caps.
"""

from __future__ import annotations

from onetool.errors import ModelError, Verdict
from onetool.registry import Registry, Unseen
from sandbox import RunError, Site

__all__ = ["MAX_CODE_CHARS", "check_sites", "too_long"]

MAX_CODE_CHARS = 100_000


def too_long(code: str) -> RunError | None:
    """The one check made before the run has its slot: it costs nothing."""
    if len(code) > MAX_CODE_CHARS:
        return Verdict.LIMIT.error(f"code is {len(code):,} characters; the limit is {MAX_CODE_CHARS:,}")
    return None


def check_sites(sites: list[Site], registry: Registry, code: str) -> RunError | None:
    """The first problem among the call sites the worker found in ``code``, or None."""
    lines: list[str] | None = None
    for pack, tool, positional, names, line, column in sites:
        sight = registry.sight(pack, tool)
        if sight.why is Unseen.HELD or (sight.status is not None and not sight.status.connected):
            continue  # the call raises ToolUnavailable, which the snippet may catch
        try:
            target = sight.found(registry.unknown(pack, tool), tool)
            if names is not None:  # *args / **kwargs: only the run itself can tell
                target.check_shape(positional, names)
        except ModelError as e:
            lines = code.splitlines() if lines is None else lines
            source = lines[line - 1] if 0 < line <= len(lines) else None
            return RunError(type(e).__name__, str(e), line, column, source, origin="precheck")
    return None
