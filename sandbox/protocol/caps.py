"""The caps both ends of the channel apply: the worker keeps within them, the host refuses what goes past them.

A module of plain numbers, so the fork-server (which imports what a worker needs) loads no more than these:
the host's typed messages (sandbox/protocol/messages.py) bring dataclasses, and with it inspect and dis,
into every fork otherwise.
"""

from __future__ import annotations

__all__ = ["MAX_DEPTH", "MAX_EXACT_INT", "MAX_IN_FLIGHT", "MAX_PROGRESS_MESSAGE", "PROGRESS_RATE"]

MAX_DEPTH = 100
"""Levels a value the worker sends may nest (sandbox/worker/_jsonable.py converts no deeper); the host's decoder
allows a few more, for the message around it (sandbox/host/_untrusted.py)."""
MAX_IN_FLIGHT = 16
"""Pack calls a worker may have waiting for replies: parallel() keeps at most this many going. A worker
that pipelines more is not a snippet."""
MAX_PROGRESS_MESSAGE = 200
"""Characters of a progress() message."""
PROGRESS_RATE = 20
"""progress() reports per second: the worker sends no more, the host passes on no more."""
MAX_EXACT_INT = 2**53
"""The largest int a float holds exactly: a progress number past it is refused, as JSON decoders may round it."""
