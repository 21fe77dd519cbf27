"""`onetool run`'s progress line: the run's progress on one line of a terminal's stderr, redrawn in place and erased
before the result prints. Shown only when stderr is a terminal: a pipe or a file gets the result alone."""

from __future__ import annotations

import shutil
import sys
from typing import TextIO

from onetool.cli._terminal import raw
from onetool.text import escape_unsafe, one_line

_ERASE = "\r\x1b[2K"  # to the line's start, then clear it


class ProgressLine:
    def __init__(self, stream: TextIO | None = None) -> None:
        self._stream = stream or raw(sys.stderr)  # its erase sequence is the CLI's own: not escaped
        self._shown = False

    @staticmethod
    def wanted(stream: TextIO | None = None) -> bool:
        return (stream or sys.stderr).isatty()

    def show(self, progress: float, total: float | None, message: str | None) -> None:
        done = f"{progress:g}" if total is None else f"{progress:g}/{total:g}"
        width = shutil.get_terminal_size().columns - 1
        # The message is the snippet's or an upstream's: escaped, so it cannot drive the terminal.
        text = escape_unsafe(one_line(f"{done} {message}" if message else done, max(width, 10)))
        self._stream.write(_ERASE + text)
        self._stream.flush()
        self._shown = True

    def clear(self) -> None:
        if self._shown:
            self._stream.write(_ERASE)
            self._stream.flush()
            self._shown = False
