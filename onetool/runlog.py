"""The gateway's recent runs, for the operator's console: what ran, on which face, how it ended, as it happens.

:class:`RunLog` keeps the last ``size`` runs in memory (per gateway process: each replica lists its own) and tells
subscribers of each one as it ends (the console's live list). A run's code is kept only when the config says an
operator may read it (``ui.show_code``), cut to ``MAX_CODE_CHARS``.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from anyio.abc import ObjectReceiveStream

from onetool.broadcast import Broadcast

__all__ = ["MAX_CODE_CHARS", "RunLog", "RunRecord"]

MAX_CODE_CHARS = 20_000
_LIVE_BUFFER = 64
"""Runs a live subscriber may fall behind by; past it it misses some (the list, read again, still has them)."""


@dataclass(frozen=True)
class RunRecord:
    id: str
    ended: datetime
    face: str
    duration: float
    calls: int
    status: str
    """SUCCESS or FAILED, as on the run's log record."""
    error_origin: str | None
    error_type: str | None
    error_message: str | None
    code: str | None
    """The snippet (cut), when ``ui.show_code`` lets an operator read it; else None."""

    @classmethod
    def of(cls, run_id: str, face: str, fields: Mapping[str, Any], code: str | None) -> RunRecord:
        """From a finished ``run`` span's fields."""
        return cls(
            id=run_id,
            ended=datetime.now(UTC),
            face=face,
            duration=float(fields.get("duration", 0.0)),
            calls=int(fields.get("calls", 0)),
            status=str(fields.get("status", "FAILED")),
            error_origin=fields.get("errorOrigin"),
            error_type=fields.get("errorType"),
            error_message=fields.get("errorMessage"),
            code=code[:MAX_CODE_CHARS] if code is not None else None,
        )


class RunLog:
    def __init__(self, size: int = 200) -> None:
        self._runs: deque[RunRecord] = deque(maxlen=size)
        self._live: Broadcast[RunRecord] = Broadcast(buffer=_LIVE_BUFFER)

    def add(self, record: RunRecord) -> None:
        self._runs.append(record)
        self._live.publish(record)

    def recent(self) -> list[RunRecord]:
        """Newest first."""
        return list(reversed(self._runs))

    def follow(self) -> AbstractAsyncContextManager[ObjectReceiveStream[RunRecord]]:
        """Each run as it ends, from now on."""
        return self._live.subscribe()
