"""An upstream's last stderr lines, for its operator (``/status`` with the admin token, ``onetool servers show``).

Bounded: the last MAX_LINES lines, each cut at MAX_CHARS characters; a line that never ends costs no more than
its head. Escaped: control, bidi and invisible characters show as escapes, so no terminal acts on them. Never for
a model: a server's stderr may hold a secret (its environment, a token in a stack trace).
"""

from __future__ import annotations

from collections import deque
from collections.abc import AsyncIterator
from typing import Final

from onetool.text import escape_unsafe

MAX_LINES: Final = 50
MAX_CHARS: Final = 500
_MAX_BYTES: Final = MAX_CHARS * 4  # room for MAX_CHARS characters of UTF-8


class StderrTail:
    """One server's last stderr lines, kept across its restarts: a crashed process's last words outlive it."""

    def __init__(self) -> None:
        self._lines: deque[str] = deque(maxlen=MAX_LINES)
        self.count = 0
        """Lines added so far, kept or not: a process's own lines are those added after the count at its start."""

    def add(self, raw: bytes) -> str:
        """Keep one line as it is shown (decoded, cut, escaped); that line."""
        text = raw.decode(errors="replace").rstrip()
        line = escape_unsafe(text if len(text) <= MAX_CHARS else text[:MAX_CHARS] + "...")
        self._lines.append(line)
        self.count += 1
        return line

    def lines(self, since: int = 0) -> list[str]:
        """The kept lines, oldest first; with ``since``, only those added after the first ``since``."""
        kept = list(self._lines)
        return kept[max(len(kept) - (self.count - since), 0) :]


async def bounded_lines(chunks: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    """The lines of a byte stream, without their newline, each cut at _MAX_BYTES: what is held of an unfinished
    line is never more than that, however long a server writes without a newline."""
    head = b""
    async for chunk in chunks:
        *ends, rest = chunk.split(b"\n")
        for end in ends:
            yield (head + end)[:_MAX_BYTES]
            head = b""
        head = (head + rest)[:_MAX_BYTES]
    if head:
        yield head
