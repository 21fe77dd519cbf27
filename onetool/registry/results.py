"""MCP tool results <-> plain Python data.

Upstream side (:func:`to_value`): a ``CallToolResult`` becomes the value a
snippet sees. ``structuredContent`` wins (unwrapping the Python SDK's
``{"result": X}`` envelope); otherwise each text part is parsed as JSON only
when it is an object or array ("007" stays a string), one part gives that
value, several give a list. Images, audio and resources become dicts
(:data:`MEDIA_TYPES`) that the final result passes through as MCP content.

Front side (:func:`run_result`): the sandbox's outcome becomes ``run``'s MCP
result: compact text for the model, ``structuredContent`` with the value,
media as real content, ``isError`` on failure, and a size cap with a note.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Set
from typing import Any

from mcp import types
from pydantic_core import to_json

from onetool.text import cut
from sandbox import Origin, RunError
from sandbox.protocol.shaping import MEDIA_DEPTH, MEDIA_TYPES, MEDIA_WALK, MIN_SHOWN

__all__ = [
    "MEDIA_TYPES",
    "ORIGIN_PREFIXES",
    "error_message",
    "error_result",
    "error_span_fields",
    "error_text",
    "is_envelope_schema",
    "media_key",
    "parse_text",
    "returned_media",
    "run_result",
    "to_value",
]

_MAX_MEDIA = 100
"""Media blocks one result carries; more stay data."""
_MAX_MEDIA_SCAN = 1_000
"""Media-like dicts fingerprinted per result (or per tool return value): bounds the work a snippet can cause."""
_MIN_ERROR_CHARS = 4_096
_MAX_SOURCE_CHARS = 1_000
_HINT = "return less, e.g. slice or select fields"


def error_result(text: str) -> types.CallToolResult:
    """A tool's failure, said in ``text``: what a face answers when the call could not be made or was stopped."""
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=True)


def to_value(result: types.CallToolResult, output_schema: Mapping[str, Any] | None = None) -> Any:
    """The plain value of an upstream tool result."""
    sc = result.structured_content
    if sc is not None:
        if _is_result_envelope(sc, output_schema):
            return sc["result"]
        return sc
    parts = [_content_value(c) for c in result.content]
    if not parts:
        return None
    return parts[0] if len(parts) == 1 else parts


def error_text(result: types.CallToolResult) -> str:
    """The message of an ``isError`` result."""
    texts = [c.text for c in result.content if isinstance(c, types.TextContent)]
    return "\n".join(texts).strip() or "the tool reported an error without a message"


def _is_result_envelope(sc: Mapping[str, Any], schema: Mapping[str, Any] | None) -> bool:
    return list(sc) == ["result"] and is_envelope_schema(schema)


def is_envelope_schema(schema: Mapping[str, Any] | None) -> bool:
    """Whether an output schema is the Python SDK's ``{"result": X}`` wrapping of a non-object return value."""
    props = schema.get("properties") if isinstance(schema, Mapping) else None
    return isinstance(props, Mapping) and list(props) == ["result"]


def _content_value(c: types.ContentBlock) -> Any:
    if isinstance(c, types.TextContent):
        return parse_text(c.text)
    if isinstance(c, types.ImageContent | types.AudioContent):
        return {"type": c.type, "data": c.data, "mimeType": c.mime_type}
    if isinstance(c, types.ResourceLink):
        return c.model_dump(mode="json", by_alias=True, exclude_none=True)
    if isinstance(c, types.EmbeddedResource):
        return {
            "type": "resource",
            "resource": c.resource.model_dump(mode="json", by_alias=True, exclude_none=True),
        }
    return c.model_dump(mode="json", by_alias=True, exclude_none=True)


def parse_text(text: str) -> Any:
    """JSON objects and arrays become data; any other text stays the string it is."""
    stripped = text.strip()
    if stripped[:1] in ("{", "[") and stripped[-1:] in ("}", "]"):
        try:
            return json.loads(stripped)
        except ValueError:
            pass
    return text


# ---- the run's result --------------------------------------------------------------------------


def run_result(
    value: Any,
    output: str,
    *,
    error: RunError | None = None,
    max_chars: int = 256 * 1024,
    media_keys: Set[str] = frozenset(),
    head: tuple[str, int] | None = None,
) -> types.CallToolResult:
    """Shape one run's outcome as ``run``'s MCP result.

    Printed output comes first, then the value (or the error's model-facing message). Media dicts in the
    value whose :func:`media_key` is in ``media_keys`` (those an upstream or local pack returned during the
    run) become MCP content and are replaced in the text by a short marker; a snippet cannot forge one.
    ``head``: the value came cut already (``RunResult.head``): the head of its text and the whole text's length.
    """
    media: list[types.ContentBlock] = []
    if media_keys:
        value = _Extractor(media_keys, media).walk(value, 0)
    content: list[types.ContentBlock] = []
    structured: dict[str, Any] = {}
    budget = max_chars
    if output:
        text = cut(output, budget, "printed output", _HINT)
        budget = max(0, budget - len(text))
        content.append(types.TextContent(type="text", text=text))
        structured["output"] = text
    if error is not None:
        limit = max(budget, _MIN_ERROR_CHARS)
        message = cut(error.message, limit, "error message", _HINT)
        content.append(types.TextContent(type="text", text=cut(error_message(error), limit + 200, "error", _HINT)))
        structured["error"] = _error_fields(error, message)
        return types.CallToolResult(content=content, structured_content=structured, is_error=True)
    if head is not None:  # a large value was cut in its worker: only its head came over
        text, length = head
    else:
        # pydantic-core renders compact JSON as json.dumps does, five times faster on numbers; a value whose
        # text is longer than can be shown came cut (above), so this one is short.
        text = value if isinstance(value, str) else to_json(value).decode()
        length = len(text)
    shown = cut(text, max(budget, MIN_SHOWN), "result", _HINT, length=length)
    if value is not None or head is not None or not output:
        content.append(types.TextContent(type="text", text=shown))
    whole = head is None and shown is text
    structured["result"] = value if whole else shown
    if not whole:
        structured["truncated"] = True
    content.extend(media)
    return types.CallToolResult(content=content, structured_content=structured, is_error=False)


def _error_fields(error: RunError, message: str) -> dict[str, Any]:
    fields: dict[str, Any] = {"type": error.type[:100], "message": message, "origin": error.origin}
    if error.line is not None:
        fields["line"] = error.line
    if error.column is not None:
        fields["column"] = error.column
    if error.source:
        fields["source"] = error.source[:_MAX_SOURCE_CHARS]
    return fields


def error_span_fields(error: RunError) -> dict[str, str]:
    """A failed run's fields in its log record: the origin says whose the type and message are."""
    return {"errorType": error.type, "errorMessage": error.message, "errorOrigin": error.origin}


ORIGIN_PREFIXES: dict[Origin, str] = {
    "host": "[onetool] ",
    "tool": "[uncaught pack-call error] ",
    "code": "[raised by the code] ",
    "precheck": "[pre-check: nothing ran] ",
}
"""How an error's text starts, by origin. Only the host's verdicts start with ``[onetool]``, and the rest of
the text cannot start a line of its own (see :func:`error_message`), so no snippet or upstream text reads
like a verdict of the host's, whatever type and message it chose (``TimeoutError``, ``WorkerCrashed``)."""
_LINE_BREAK = re.compile(r"(\r\n|[\n\r\v\f\x1c-\x1e\x85\u2028\u2029])")


def error_message(error: RunError) -> str:
    """``[raised by the code] ZeroDivisionError: division by zero (line 3: x = 1/0)``, with the column where it is
    known (``SyntaxError: '(' was never closed (line 2, column 5: y = (2,)``); every line after the first is
    indented, so only the prefix, written here, starts a line."""
    text = f"{error.type}: {error.message}"
    if error.line:
        source = f": {error.source.strip()[:_MAX_SOURCE_CHARS]}" if error.source else ""
        text += f" ({error.where}{source})"
    return ORIGIN_PREFIXES[error.origin] + _LINE_BREAK.sub(r"\1  ", text)


def media_key(value: Any) -> str | None:
    """A fingerprint of a media dict (image, audio, resource, resource link), or None for anything else."""
    if not isinstance(value, dict) or value.get("type") not in MEDIA_TYPES:
        return None
    try:
        canonical = json.dumps(value, sort_keys=True, separators=(",", ":"))
    except (TypeError, ValueError):
        return None
    return hashlib.sha256(canonical.encode("utf-8", "replace")).hexdigest()


def returned_media(value: Any) -> set[str]:
    """The media keys of a tool's return value: the value itself, or the parts of a content list."""
    items = value[:_MAX_MEDIA_SCAN] if isinstance(value, list) else [value]
    return {key for item in items if (key := media_key(item)) is not None}


class _Extractor:
    """Moves known media dicts of a value into ``media``, leaving a marker naming the content index.

    Bounded (sandbox/protocol/shaping.py): a depth of MEDIA_DEPTH, MEDIA_WALK values visited, at most _MAX_MEDIA
    blocks, and at most _MAX_MEDIA_SCAN candidates fingerprinted.
    """

    def __init__(self, keys: Set[str], media: list[types.ContentBlock]) -> None:
        self._keys = keys
        self._media = media
        self._scanned = 0
        self._visits = MEDIA_WALK

    def walk(self, value: Any, depth: int) -> Any:
        self._visits -= 1
        if depth > MEDIA_DEPTH or self._visits < 0:
            return value
        if isinstance(value, list):
            return [self.walk(v, depth + 1) for v in value]
        if not isinstance(value, dict):
            return value
        block = self._block(value)
        if block is None:
            return {k: self.walk(v, depth + 1) for k, v in value.items()}
        self._media.append(block)
        marker = {"type": value["type"], "content": f"attached as MCP content #{len(self._media)}"}
        for key in ("mimeType", "uri", "name"):
            if key in value:
                marker[key] = value[key]
        if value["type"] == "resource" and isinstance(value.get("resource"), dict):
            marker["uri"] = value["resource"].get("uri")
        return marker

    def _block(self, value: dict[str, Any]) -> types.ContentBlock | None:
        if value.get("type") not in MEDIA_TYPES or len(self._media) >= _MAX_MEDIA or self._scanned >= _MAX_MEDIA_SCAN:
            return None
        self._scanned += 1
        if media_key(value) not in self._keys:
            return None
        try:
            kind = value["type"]
            if kind in ("image", "audio"):
                cls = types.ImageContent if kind == "image" else types.AudioContent
                return cls(type=kind, data=value["data"], mime_type=value["mimeType"])
            if kind == "resource_link":
                return types.ResourceLink.model_validate(value)
            return types.EmbeddedResource.model_validate(value)
        except (KeyError, TypeError, ValueError):
            return None  # only looks like media: it stays ordinary data
