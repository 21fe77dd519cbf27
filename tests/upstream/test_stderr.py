"""An upstream's stderr tail: bounded in lines, line length and memory, escaped, and kept across restarts."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from onetool.upstream._stderr import MAX_CHARS, MAX_LINES, StderrTail, bounded_lines

pytestmark = pytest.mark.anyio


async def chunks(*parts: bytes) -> AsyncIterator[bytes]:
    for part in parts:
        yield part


async def test_a_line_that_never_ends_keeps_only_its_head() -> None:
    flood = [b"x" * 65536] * 200  # 13 MB without a newline
    lines = [line async for line in bounded_lines(chunks(b"a\nb", b"c\n", *flood, b"x\nlast"))]
    assert lines[:2] == [b"a", b"bc"] and lines[3] == b"last"
    assert lines[2] == b"x" * (MAX_CHARS * 4)


def test_the_last_lines_are_kept_cut_and_escaped() -> None:
    tail = StderrTail()
    for i in range(MAX_LINES + 10):
        tail.add(f"line {i}".encode())
    assert tail.lines() == [f"line {i}" for i in range(10, MAX_LINES + 10)]
    # A restarted process's own lines are those after the count at its start.
    assert tail.lines(since=MAX_LINES + 8) == [f"line {MAX_LINES + 8}", f"line {MAX_LINES + 9}"]
    assert tail.lines(since=MAX_LINES + 10) == []
    hostile = "\x1b]52;c;aGk=\x07 red \u202e"
    line = tail.add((hostile + "y" * 600 + "\r").encode())
    assert line == "\\x1b]52;c;aGk=\\x07 red \\u202e" + "y" * (MAX_CHARS - len(hostile)) + "..."
    assert tail.lines()[-1] == line and len(tail.lines()) == MAX_LINES
