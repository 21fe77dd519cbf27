"""Cut results on ``/mcp/direct``, and ``read_cache``, which reads them whole.

An upstream result whose text is longer than ``sandbox.max_output`` characters is cut as ``run``'s results are
(:func:`onetool.text.cut`); its note names a key under which the whole text stays readable in slices through
``read_cache(key, offset, limit)``. Non-text content (images, audio, resources) passes through untouched.

``structuredContent``: a model reads ``content``, and a client that shows ``structuredContent`` would show all of
it, so a result whose structured content is over twice the limit as compact JSON (JSON escapes make a copy of a
text up to about twice as long) loses it; when the text fits, that JSON is what is cut and kept. A tool that
declares an ``outputSchema`` must return structured content on success, and clients such as the MCP SDK's reject
a success without it; an ``isError`` in its place reads as a failure to an agent. So /mcp/direct lists a tool's
``outputSchema`` only when a cut result still matches it (:func:`keeps_output_schema`: the Python SDK's
``{"result": "..."}`` envelope of a string, which keeps its shape holding the cut text); any other is left out of
the listing, and the tool's description says so (:func:`without_output_schema`). A cut result is then a success
either way. Structured content that fits stays as it is.

The cache is the gateway's, bounded by ``direct.cache_entries``, ``direct.cache_mb`` (measured as Python holds
the text) and ``direct.cache_ttl``: the least recently read entry goes first, and a result larger than the whole
budget is cut and not kept. Keys are random (144 bits) and nothing lists them, so a key is a capability: the
client that got a cut result can read it, and another client cannot find it. Keys are not bound to an MCP session
because 2026-07-28 clients, and ``http.stateless`` gateways, have none. Each replica keeps its own cache.
"""

from __future__ import annotations

import secrets
import sys
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from mcp.types import CallToolResult, ContentBlock, TextContent, Tool, ToolAnnotations
from pydantic_core import to_json

from onetool.config import DirectConfig
from onetool.errors import ArgumentError
from onetool.registry.results import is_envelope_schema
from onetool.text import cut, shown_name

READ_CACHE = "read_cache"
_KEY_BYTES = 18
"""144 random bits: a key cannot be guessed, and nothing lists the keys."""
_SIZE_KEYS = "direct.cache_entries, direct.cache_mb"


@dataclass(frozen=True)
class _Entry:
    text: str
    size: int
    expires: float


class ResultCache:
    """Whole texts of cut results by random key: at most ``entries`` of them, ``max_bytes`` together, each for
    ``ttl`` seconds. Only touched from the event loop, between awaits, so it needs no lock."""

    def __init__(self, entries: int, max_bytes: int, ttl: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.entries, self.max_bytes, self.ttl = entries, max_bytes, ttl
        self._clock = clock
        self._kept: OrderedDict[str, _Entry] = OrderedDict()
        self.size = 0
        """Bytes all kept texts take."""

    @classmethod
    def from_config(cls, config: DirectConfig) -> ResultCache:
        return cls(config.cache_entries, int(config.cache_mb * 1024 * 1024), config.cache_ttl)

    def __len__(self) -> int:
        return len(self._kept)

    def put(self, text: str) -> str | None:
        """Keep ``text``; its key, or None when it alone is larger than the whole budget."""
        size = sys.getsizeof(text)
        if size > self.max_bytes:
            return None
        self._expire()
        while self._kept and (len(self._kept) >= self.entries or self.size + size > self.max_bytes):
            self._drop(next(iter(self._kept)))
        key = secrets.token_urlsafe(_KEY_BYTES)
        self._kept[key] = _Entry(text, size, self._clock() + self.ttl)
        self.size += size
        return key

    def get(self, key: str) -> str | None:
        """The text kept under ``key``, or None when it expired, was pushed out or never was."""
        self._expire()
        entry = self._kept.get(key)
        if entry is None:
            return None
        self._kept.move_to_end(key)
        return entry.text

    def _expire(self) -> None:
        now = self._clock()
        for key in [k for k, e in self._kept.items() if e.expires <= now]:
            self._drop(key)

    def _drop(self, key: str) -> None:
        self.size -= self._kept.pop(key).size


def cut_result(
    result: CallToolResult, limit: int, cache: ResultCache, output_schema: Mapping[str, Any] | None
) -> CallToolResult:
    """``result`` itself when its text and its structured content (as compact JSON) fit in ``limit`` characters;
    else cut, its whole text kept in ``cache``. ``output_schema``: the one the tool declares, if any."""
    text = "\n".join(c.text for c in result.content if isinstance(c, TextContent))
    structured = result.structured_content
    as_json = to_json(structured).decode() if structured is not None else ""
    # JSON escapes make a structured copy of a text (the spec has a tool send both) up to about twice as long.
    json_over = len(as_json) > 2 * limit
    if len(text) <= limit and not json_over:
        return result
    whole, before = (text, "") if len(text) > limit else (as_json, text)
    key = cache.put(whole)
    shown_chars = max(limit - len(before), 1_000)
    shown = cut(whole, shown_chars, "result", _hint(key, shown_chars, cache.ttl))
    media: list[ContentBlock] = [c for c in result.content if not isinstance(c, TextContent)]
    content: list[ContentBlock] = [TextContent(type="text", text=t) for t in (before, shown) if t]
    if not json_over:
        return result.model_copy(update={"content": [*content, *media]})
    string = structured is not None and list(structured) == ["result"] and isinstance(structured["result"], str)
    if string and not result.is_error and keeps_output_schema(output_schema):
        return result.model_copy(update={"content": [*content, *media], "structured_content": {"result": shown}})
    # Its outputSchema, if it has one, was not listed: a success without structured content is one.
    return result.model_copy(update={"content": [*content, *media], "structured_content": None})


def keeps_output_schema(schema: Mapping[str, Any] | None) -> bool:
    """Whether /mcp/direct lists ``schema`` as the tool's outputSchema: only when a cut result still matches it,
    which the Python SDK's envelope of a string does (its ``result`` holds the cut text)."""
    if schema is None or not is_envelope_schema(schema):
        return False
    inner = schema["properties"]["result"]
    return isinstance(inner, Mapping) and inner.get("type") == "string"


OUTPUT_SCHEMA_NOTE = (
    "[/mcp/direct: the outputSchema of this tool is not listed, as a result too long for this endpoint is cut "
    "(sandbox.max_output), which no schema would match; its structuredContent comes back while it fits]"
)


def without_output_schema(tool: Tool) -> Tool:
    """``tool`` as /mcp/direct lists it: its outputSchema left out, and said so, unless a cut result keeps it."""
    if tool.output_schema is None or keeps_output_schema(tool.output_schema):
        return tool
    description = f"{tool.description}\n\n{OUTPUT_SCHEMA_NOTE}" if tool.description else OUTPUT_SCHEMA_NOTE
    return tool.model_copy(update={"output_schema": None, "description": description})


def _hint(key: str | None, limit: int, ttl: float) -> str:
    if key is None:
        return f"it is larger than the whole read_cache budget ({_SIZE_KEYS}), so it was not kept"
    return f"the whole of it is kept for {ttl:g} s: {READ_CACHE}(key='{key}', offset={limit}) reads on"


READ_CACHE_TOOL = Tool(
    name=READ_CACHE,
    description=(
        "Read a cut result whole, in slices: a tool result longer than this endpoint's limit is cut, and its note "
        "names a key. Returns `limit` characters from `offset` (default and most: the endpoint's limit), and says "
        "how many remain and where to read on. A key expires after a while, or when newer results push it out."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "key": {"type": "string", "description": "the key the cut result's note gave"},
            "offset": {"type": "integer", "minimum": 0, "description": "first character to return (default 0)"},
            "limit": {"type": "integer", "minimum": 1, "description": "characters to return"},
        },
        "required": ["key"],
        "additionalProperties": False,
    },
    annotations=ToolAnnotations(read_only_hint=True, destructive_hint=False, open_world_hint=False),
)


def read_cache(cache: ResultCache, arguments: Mapping[str, Any], max_chars: int) -> CallToolResult:
    """One slice of a kept result: its text, then a note saying which characters these are and how many remain."""
    key: str = arguments["key"]
    offset: int = arguments.get("offset", 0)
    limit: int = min(arguments.get("limit", max_chars), max_chars)
    text = cache.get(key)
    if text is None:
        raise ArgumentError(
            f"{READ_CACHE}: no result is kept under key '{shown_name(key)}': it expired (after "
            f"{cache.ttl:g} s, direct.cache_ttl), newer results pushed it out ({_SIZE_KEYS}), another replica of "
            "the gateway cut it, or the key is wrong. Call the tool again for a fresh key."
        )
    if offset >= len(text):
        raise ArgumentError(
            f"{READ_CACHE}: offset {offset:,} is past the end: the result has {len(text):,} characters "
            f"(offsets 0 to {len(text) - 1:,})"
        )
    end = min(offset + limit, len(text))
    remaining = len(text) - end
    more = f"{remaining:,} remain: {READ_CACHE}(key='{key}', offset={end}) reads on" if remaining else "the end"
    note = f"\n... [{READ_CACHE}: characters {offset:,} to {end:,} of {len(text):,}; {more}]"
    return CallToolResult(
        content=[TextContent(type="text", text=text[offset:end] + note)],
        structured_content={"offset": offset, "end": end, "total": len(text), "remaining": remaining},
    )
