"""What the CLI writes reaches a terminal escaped: an upstream's names, descriptions, instructions and errors, a
model's proposals, log lines, anything. Each command (but the servers, whose stdout may be the MCP channel) writes
through :class:`Escaped` streams, so no output path can write raw ESC, BEL, C1, bidi or other controls, whatever
it prints: a terminal acts on none of them (OSC 52 writes the clipboard), as :func:`onetool.text.escape_unsafe` says.
"""

from __future__ import annotations

import io
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TextIO

from onetool.text import escape_unsafe

__all__ = ["Escaped", "escaped_output", "raw"]


class Escaped(io.TextIOBase):
    """A text stream that writes to ``stream`` what it is given with every unsafe character escaped (newlines and
    tabs kept). JSON the CLI prints is ASCII with DEL escaped too, so nothing in it changes."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream

    def write(self, text: str) -> int:
        self.stream.write(escape_unsafe(text, keep_lines=True))
        return len(text)

    def flush(self) -> None:
        self.stream.flush()

    def isatty(self) -> bool:
        return self.stream.isatty()

    def fileno(self) -> int:
        return self.stream.fileno()

    def writable(self) -> bool:
        return True

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return self.stream.encoding


def raw(stream: TextIO) -> TextIO:
    """The stream under an :class:`Escaped` one: for the CLI's own control sequences (the progress line's erase)."""
    return stream.stream if isinstance(stream, Escaped) else stream


@contextmanager
def escaped_output() -> Iterator[None]:
    """stdout and stderr escaped for the block."""
    saved = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = Escaped(raw(sys.stdout)), Escaped(raw(sys.stderr))
    try:
        yield
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        sys.stdout, sys.stderr = saved
