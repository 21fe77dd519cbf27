"""The host's verdicts: every kind of error the host itself decides, declared once.

An error whose origin is "host" (see `Origin`) is one of these: the host made it, where it made it, and its
type is the verdict's value. Those values are what clients have always seen as the error's type and never
change. Errors the worker reports name the snippet's own exception types instead, which no list holds.
"""

from __future__ import annotations

from enum import StrEnum

from sandbox.protocol.api import RunError

__all__ = ["Verdict"]


class Verdict(StrEnum):
    BUSY = "BusyError"
    """No run slot came free in time (sandbox.max_concurrent_runs, sandbox.max_workers): the run was not started."""
    TIMEOUT = "TimeoutError"
    """The run's wall-clock (sandbox.timeout) or CPU (sandbox.cpu_seconds) time limit."""
    LIMIT = "LimitError"
    """A per-run cap the host checks itself: pack calls, calls waiting for replies, bytes held, a flood of progress
    reports, the host's memory for run traffic; and the gateway's pre-check (the code's length)."""
    CRASHED = "WorkerCrashed"
    """The worker died, broke the protocol, could not be started, or was lost with the fork-server."""
    INTERNAL = "InternalError"
    """The sandbox itself failed: the gateway's last resort around a run."""

    def error(self, message: str) -> RunError:
        """This verdict as a RunError: origin "host", its type the plain string value."""
        return RunError(self.value, message, origin="host")
