"""The line framing both stdio links read with: lines cut from chunks however the chunks fall."""

from __future__ import annotations

import anyio
import pytest

from onetool.stdio_lines import LineReader


class _Chunks(LineReader):
    def __init__(self, *chunks: bytes, max_line: int | None = None) -> None:
        super().__init__(max_line)
        self._chunks = iter(chunks)
        self.reads = 0
        self.overflowed = False

    async def _read(self) -> bytes:
        self.reads += 1
        return next(self._chunks, b"")

    def _overflow(self, lines: list[bytes]) -> None:
        super()._overflow(lines)
        self.overflowed = True

    def _message(self, line: bytes) -> bytes | None:  # type: ignore[override]
        return None if line == b"skip" else line


async def _all(reader: LineReader) -> list[bytes]:
    return [line async for line in reader]  # type: ignore[misc]


@pytest.mark.parametrize(
    "chunks",
    [
        (b"one\ntwo\n\nthree\n",),
        (b"o", b"ne\ntw", b"o\n", b"\n", b"thr", b"e", b"e\n"),
        (b"one\n", b"two\nthree", b"\nfour"),  # a last line without its newline is dropped
        (b"one\nskip\ntwo", b"\n   \nthree\n"),
    ],
)
async def test_lines_are_cut_from_chunks_however_they_fall(chunks: tuple[bytes, ...]) -> None:
    assert await _all(_Chunks(*chunks)) == [b"one", b"two", b"three"]


async def test_a_line_in_many_chunks_arrives_whole() -> None:
    line = b"x" * 1_000_000
    pieces = [line[i : i + 4096] for i in range(0, len(line), 4096)]
    assert await _all(_Chunks(*pieces, b"\n")) == [line]


async def test_reading_ends_at_close_once_the_lines_read_are_taken() -> None:
    reader = _Chunks(b"one\ntwo\n", b"three\n")
    assert await reader.receive() == b"one"
    reader.close()
    assert await reader.receive() == b"two"
    with pytest.raises(anyio.EndOfStream):
        await reader.receive()


@pytest.mark.parametrize(
    ("chunks", "reads"),
    [
        ((b"one\ntwo\n0123456789X\nfour\n",), 1),  # a whole line too long
        ((b"one\ntwo\n01234", b"56789X", b"\nfour\n"), 2),  # the line under way grows too long
        ((b"one\n", b"two\n0123456789X", b"X\nfour\n"), 2),
    ],
)
async def test_a_line_past_the_cap_ends_the_stream_where_it_starts(chunks: tuple[bytes, ...], reads: int) -> None:
    reader = _Chunks(*chunks, max_line=10)
    assert await _all(reader) == [b"one", b"two"]
    assert reader.overflowed
    assert reader.reads == reads, "it read past the line too long"


async def test_lines_up_to_the_cap_pass() -> None:
    reader = _Chunks(b"0123456789\n01234", b"56789\n", max_line=10)
    assert await _all(reader) == [b"0123456789", b"0123456789"]
    assert not reader.overflowed
