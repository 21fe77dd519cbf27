"""Cut results on /mcp/direct and read_cache: a real gateway (in-process) with a real upstream whose tools return as
much as asked (tests/fixtures/big_server.py), through the SDK's MCP client of both eras; the cache's bounds with a
clock the test moves."""

from __future__ import annotations

import json
import re
import sys
from collections.abc import AsyncIterator
from typing import Any

import pytest
from mcp import Client, types

from onetool.config import Config
from onetool.core.gateway import Gateway
from onetool.serve.direct import build_direct_server
from onetool.serve.direct._cache import OUTPUT_SCHEMA_NOTE, ResultCache
from tests.conftest import FIXTURES, PYTHON
from tests.fixtures.big_server import numbered
from tests.gateways import text_of

pytestmark = pytest.mark.anyio

LIMIT = 1_000
KEY = re.compile(r"read_cache\(key='([A-Za-z0-9_-]+)', offset=(\d+)\)")


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
async def gateway() -> AsyncIterator[Gateway]:
    config = Config.model_validate(
        {
            "servers": {"big": {"command": PYTHON, "args": [str(FIXTURES / "big_server.py")]}},
            "sandbox": {"max_output": LIMIT},
            "direct": {"cache_entries": 4, "cache_mb": 1},
        }
    )
    async with Gateway(config, warm_workers=0) as gateway:
        yield gateway


@pytest.fixture(params=["auto", "legacy"])
async def client(gateway: Gateway, request: pytest.FixtureRequest) -> AsyncIterator[Client]:
    async with Client(build_direct_server(gateway), mode=request.param) as client:  # type: ignore[arg-type]
        yield client


def key_of(result: types.CallToolResult) -> tuple[str, int]:
    found = KEY.search(text_of(result))
    assert found, text_of(result)
    return found.group(1), int(found.group(2))


async def read_all(client: Client, key: str, offset: int, **more: Any) -> str:
    """Every slice from ``offset`` on, following each note's own pointer to the next."""
    parts = []
    while True:
        result = await client.call_tool("read_cache", {"key": key, "offset": offset, **more})
        assert not result.is_error, text_of(result)
        text = text_of(result)
        body, note = text.rsplit("\n... [read_cache: ", 1)
        parts.append(body)
        assert result.structured_content is not None
        assert result.structured_content["offset"] == offset
        if result.structured_content["remaining"] == 0:
            assert note.endswith("the end]")
            return "".join(parts)
        offset = int(KEY.search(note).group(2))  # type: ignore[union-attr]


async def test_a_small_result_passes_untouched(client: Client) -> None:
    result = await client.call_tool("big:text", {"chars": LIMIT})
    assert text_of(result) == numbered(LIMIT)
    assert result.structured_content == {"result": numbered(LIMIT)}


async def test_a_long_text_is_cut_with_a_key_and_read_whole_in_slices(client: Client) -> None:
    whole = numbered(50_000)
    result = await client.call_tool("big:plain", {"chars": 50_000})
    assert not result.is_error
    text = text_of(result)
    assert text.startswith(whole[:LIMIT] + "\n... [result cut: showing 1,000 of 50,000 characters; ")
    key, offset = key_of(result)
    assert offset == LIMIT
    assert await read_all(client, key, offset) == whole[LIMIT:]
    # A smaller limit, from anywhere: the slice is exactly those characters.
    piece = await client.call_tool("read_cache", {"key": key, "offset": 12_345, "limit": 20})
    assert text_of(piece).startswith(whole[12_345:12_365] + "\n... [read_cache: characters 12,345 to 12,365 of ")
    assert piece.structured_content == {"offset": 12_345, "end": 12_365, "total": 50_000, "remaining": 37_635}


async def test_no_slice_is_larger_than_the_limit(client: Client) -> None:
    key, _ = key_of(await client.call_tool("big:plain", {"chars": 5_000}))
    piece = await client.call_tool("read_cache", {"key": key, "limit": 4_000})
    assert piece.structured_content is not None and piece.structured_content["end"] == LIMIT


async def test_an_envelope_keeps_its_shape_holding_the_cut_text(client: Client) -> None:
    """A Python-SDK tool returning a string has an outputSchema; the SDK client validates the cut result."""
    result = await client.call_tool("big:text", {"chars": 30_000})
    assert not result.is_error
    assert result.structured_content is not None
    assert result.structured_content["result"] == text_of(result)
    assert len(text_of(result)) < 2 * LIMIT


async def test_structured_content_past_the_limit_under_a_schema_is_a_success_the_sdk_accepts(client: Client) -> None:
    """A tool whose outputSchema no cut would match is listed without it (its description says so), so a cut
    result is a success without structured content: the SDK client validates it against the listing."""
    listed = {t.name: t for t in (await client.list_tools()).tools}
    assert listed["big:table"].output_schema is None and OUTPUT_SCHEMA_NOTE in (listed["big:table"].description or "")
    assert listed["big:text"].output_schema is not None  # the envelope of a string: a cut keeps its shape
    result = await client.call_tool("big:table", {"rows": 2_000})
    assert not result.is_error and result.structured_content is None
    text = text_of(result)
    assert "[result cut: showing" in text and "isError" not in text
    key, offset = key_of(result)
    rest = await read_all(client, key, offset)
    assert json.loads(text[:offset] + rest) == {"rows": [{"id": i, "name": f"row {i:09d}"} for i in range(2_000)]}
    small = await client.call_tool("big:table", {"rows": 2})
    assert small.structured_content == {
        "rows": [{"id": 0, "name": "row 000000000"}, {"id": 1, "name": "row 000000001"}]
    }


async def test_short_text_beside_large_structured_content_keeps_the_text_and_cuts_the_json(client: Client) -> None:
    result = await client.call_tool("big:short_text_big_structure", {"rows": 5_000})
    assert not result.is_error and result.structured_content is None
    first, second = (c.text for c in result.content if isinstance(c, types.TextContent))
    assert first == "5000 rows"
    assert second.startswith('{"rows":[{"id":0},') and "[result cut: showing" in second


async def test_media_passes_through_a_cut(client: Client) -> None:
    result = await client.call_tool("big:picture", {"chars": 10_000})
    images = [c for c in result.content if isinstance(c, types.ImageContent)]
    assert len(images) == 1 and images[0].mime_type == "image/png"
    assert "[result cut: showing 1,000 of 10,000 characters" in text_of(result)


async def test_unknown_keys_and_offsets_past_the_end_say_what_is_wrong(client: Client) -> None:
    unknown = await client.call_tool("read_cache", {"key": "no-such-key\u202e"})
    assert unknown.is_error
    assert "no result is kept under key 'no-such-key<U+202E RIGHT-TO-LEFT OVERRIDE>'" in text_of(unknown)
    assert "direct.cache_ttl" in text_of(unknown) and "Call the tool again" in text_of(unknown)
    key, _ = key_of(await client.call_tool("big:plain", {"chars": 2_000}))
    past = await client.call_tool("read_cache", {"key": key, "offset": 2_000})
    assert past.is_error
    assert text_of(past) == (
        "read_cache: offset 2,000 is past the end: the result has 2,000 characters (offsets 0 to 1,999)"
    )
    negative = await client.call_tool("read_cache", {"key": key, "offset": -1})
    assert negative.is_error and "offset" in text_of(negative)


async def test_the_cache_stays_within_its_entries_and_bytes(gateway: Gateway, client: Client) -> None:
    """A model that asks for many large results cannot make the gateway hold more than direct.cache_*."""
    keys = [key_of(await client.call_tool("big:plain", {"chars": 100_000}))[0] for _ in range(6)]
    answers = [await client.call_tool("read_cache", {"key": k, "limit": 10}) for k in keys]
    assert [a.is_error for a in answers] == [True, True, False, False, False, False]  # 4 entries at most
    too_big = await client.call_tool("big:plain", {"chars": 2_000_000})  # more than direct.cache_mb alone
    assert "larger than the whole read_cache budget (direct.cache_entries, direct.cache_mb)" in text_of(too_big)
    assert "read_cache(key=" not in text_of(too_big)


def test_bounds_by_entries_bytes_and_age() -> None:
    now = [0.0]
    cache = ResultCache(entries=3, max_bytes=3 * sys.getsizeof("x" * 1000), ttl=60, clock=lambda: now[0])
    a, b, c = (cache.put(ch * 1000) for ch in "abc")
    assert a and b and c and len(cache) == 3
    assert cache.get(a) == "a" * 1000  # read last: b is now the least recently read
    d = cache.put("d" * 1000)
    assert d and cache.get(b) is None and cache.get(a) and cache.get(c)
    assert cache.put("e" * 2000) and len(cache) == 2  # by bytes: two entries go for one twice their size
    assert cache.size <= cache.max_bytes
    assert cache.put("f" * 10_000) is None
    now[0] = 61
    assert cache.get(d) is None and len(cache) == 0 and cache.size == 0


def test_keys_are_random() -> None:
    cache = ResultCache(entries=100, max_bytes=10**6, ttl=60)
    keys = {cache.put("x") for _ in range(100)}
    assert len(keys) == 100 and all(k and len(k) == 24 for k in keys)
