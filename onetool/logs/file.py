"""The log file read back for an operator (``onetool logs``): its rotated files, then the file itself, then, when
following, each line appended to it; with a filter that keeps the records asked for.

A record is a line as ``logs._FORMAT`` writes it (:data:`~onetool.logs.RECORD_HEAD`) and the lines that continue
it (a traceback). Its fields are logfmt ``key=value`` tokens, each value quoted as :func:`~onetool.logs.quoted`
quotes it; a filter compares a field's token with the wanted value quoted the same way, so text inside a quoted
message or value never passes for a field.
"""

from __future__ import annotations

import glob
import math
import os
import re
import time
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import TextIO

from onetool.logs import RECORD_HEAD, logger, quoted

__all__ = ["POLL_SECONDS", "RecordFilter", "follow", "read_lines", "rotated_files"]

POLL_SECONDS = 0.2
"""How often a followed file is checked for new lines: what a record may wait before it is shown."""
_ROTATED = r"\.\d{4}-\d{2}-\d{2}_\d{2}-\d{2}-\d{2}_\d{6}(?:\.\d+)?"
"""What loguru puts between a rotated file's stem and suffix: the file's creation time (a counter on a clash)."""
_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|(?<!\S)(\w+)=("(?:[^"\\]|\\.)*"|\S*)')
"""A quoted message, matched whole so nothing inside it reads as a field, or one ``key=value`` field."""


def rotated_files(path: Path) -> list[Path]:
    """The files loguru rotated ``path`` into that retention kept, oldest first (their names sort by time)."""
    stem, suffix = os.path.splitext(path.name)
    name = re.compile(re.escape(stem) + _ROTATED + re.escape(suffix))
    return sorted(p for p in path.parent.glob(f"{glob.escape(stem)}.*") if name.fullmatch(p.name))


def read_lines(paths: Iterable[Path]) -> Iterator[str]:
    """Every line of ``paths``, in order, without its newline; bytes that are not UTF-8 kept as lone surrogates,
    which the printer escapes."""
    for path in paths:
        with _open(path) as f:
            for line in f:
                yield line.removesuffix("\n")


def follow(path: Path) -> Iterator[str]:
    """The lines of ``path`` from its start, then each line appended to it, for as long as the caller iterates.

    A rotation (the file renamed, a new one created at ``path``) is followed: the rest of the old file first, then
    the new one from its start. A file that does not exist yet is waited for.
    """
    file: TextIO | None = None
    pending = ""  # a line whose newline is not written yet
    try:
        while True:
            if file is None and path.exists():
                file = _open(path)
            chunk = file.read() if file is not None else ""
            if chunk:
                *lines, pending = (pending + chunk).split("\n")
                yield from lines
            elif file is not None and _replaced(path, file):
                if pending:
                    yield pending
                    pending = ""
                file.close()
                file = None
            else:
                time.sleep(POLL_SECONDS)
    finally:
        if file is not None:
            file.close()


class RecordFilter:
    """Keeps the records at ``level`` or above (a loguru level name; None: every level) whose fields have the
    ``fields`` values (e.g. ``{"server": "github", "runId": "8c1f..."}``). Called with each line in order: a line
    that continues a record goes with it."""

    def __init__(self, level: str | None = None, fields: Mapping[str, str] | None = None) -> None:
        self._min = -math.inf if level is None else _number(level)
        self._fields = {key: quoted(value) for key, value in (fields or {}).items()}
        self._keep = level is None and not self._fields  # lines before the first record belong to none

    def __call__(self, line: str) -> bool:
        head = RECORD_HEAD.match(line)
        if head is not None:
            self._keep = _number(head["level"]) >= self._min and self._matches(line, head.end())
        return self._keep

    def _matches(self, line: str, start: int) -> bool:
        if not self._fields:
            return True
        found = {m[1]: m[2] for m in _TOKEN.finditer(line, start) if m[1]}
        return all(found.get(key) == value for key, value in self._fields.items())


def _number(level: str) -> float:
    try:
        return float(logger.level(level).no)
    except ValueError:  # a level this process does not know: shown only when no level is asked for
        return 0.0


def _open(path: Path) -> TextIO:
    return path.open(encoding="utf-8", errors="surrogateescape")


def _replaced(path: Path, file: TextIO) -> bool:
    """Whether ``path`` now names another file than ``file`` (it was rotated); False while no new file exists."""
    try:
        return os.stat(path).st_ino != os.fstat(file.fileno()).st_ino
    except FileNotFoundError:
        return False
