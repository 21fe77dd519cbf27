"""The gateway's recent runs, for the operator's console: what ran, on which face, how it ended, as it happens.

:class:`RunLog` keeps the last ``size`` runs in memory (per gateway process: each replica lists its own) and cues
subscribers as runs end (the console's live list). Each run gets the next :class:`Mark` of its log, so
a live list that lost its connection asks for the runs after the last one it showed (:meth:`RunLog.since`) and
shows every run once, none missed. A run's code is kept only when the config says an operator may read it
(``ui.show_code``), cut to ``MAX_CODE_CHARS``.
"""

from __future__ import annotations

import re
import secrets
from collections import deque
from collections.abc import Mapping
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

from anyio.abc import ObjectReceiveStream

from onetool.broadcast import Broadcast

__all__ = ["MAX_CODE_CHARS", "Mark", "RunLog", "RunRecord"]

MAX_CODE_CHARS = 20_000
_LIVE_BUFFER = 1
"""A live subscriber is told that runs ended, not which: it reads them with :meth:`RunLog.since`, so none is lost
however far behind it falls (within the log's ``size``)."""


_MARK = re.compile(r"([0-9a-f]{1,16})-([0-9]{1,18})")
"""A mark as text: what a browser sends back is read only if it is one."""


@dataclass(frozen=True)
class Mark:
    """Where a run stands in its log: the log's ``epoch`` (a new one each time a gateway starts) and its place in
    it. Written ``epoch-seq``, as a live list's SSE event id."""

    epoch: str
    seq: int

    def __str__(self) -> str:
        return f"{self.epoch}-{self.seq}"

    @classmethod
    def parse(cls, text: str | None) -> Mark | None:
        """The mark ``text`` writes, or None for text that is none (a browser sends back what it was given)."""
        found = _MARK.fullmatch(text or "")
        return cls(found[1], int(found[2])) if found else None


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
    mark: Mark | None = None
    """Its place in the log, once added (:meth:`RunLog.add`)."""

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
        self._live: Broadcast[None] = Broadcast(buffer=_LIVE_BUFFER)
        self._epoch = secrets.token_hex(4)
        self._seq = 0

    def add(self, record: RunRecord) -> None:
        self._seq += 1
        self._runs.append(replace(record, mark=Mark(self._epoch, self._seq)))
        self._live.publish(None)

    def recent(self) -> list[RunRecord]:
        """Newest first."""
        return list(reversed(self._runs))

    def last(self) -> Mark:
        """The mark of the latest run (``seq`` 0 before the first): a list showing :meth:`recent` stands there."""
        return Mark(self._epoch, self._seq)

    def since(self, mark: Mark) -> list[RunRecord]:
        """The runs after ``mark``, oldest first; every run kept for a mark of another epoch (a gateway since
        restarted: its runs are all new to whoever saw the old one's)."""
        after = mark.seq if mark.epoch == self._epoch else 0
        return [run for run in self._runs if run.mark is not None and run.mark.seq > after]

    def follow(self) -> AbstractAsyncContextManager[ObjectReceiveStream[None]]:
        """A cue each time runs ended, from now on (read them with :meth:`since`)."""
        return self._live.subscribe()
