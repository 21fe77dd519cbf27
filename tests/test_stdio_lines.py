"""The line framing both stdio links read with: lines cut from chunks however the chunks fall."""

from __future__ import annotations

import anyio
import pytest

from onetool.stdio_lines import LineReader


class _Chunks(LineReader):
    def __init__(self, *chunks: bytes) -> None:
        super().__init__()
        self._chunks = iter(chunks)

    async def _read(self) -> bytes:
        return next(self._chunks, b"")

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
