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

import base64
import json
from collections.abc import Mapping
from typing import Any

from mcp import types

MEDIA_TYPES = ("image", "audio", "resource", "resource_link")


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
    if list(sc) != ["result"]:
        return False
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
    error: Mapping[str, Any] | None = None,
    max_chars: int = 256 * 1024,
) -> types.CallToolResult:
    """Shape one run's outcome as ``run``'s MCP result.

    ``error`` is ``{"type", "message", "line"?, "source"?}``; its text is the
    model-facing message. Printed output comes first, then the value (or the
    error). Media found in the value become MCP content and are replaced in
    the text by a short marker.
    """
    media: list[types.ContentBlock] = []
    value = _extract_media(value, media)
    content: list[types.ContentBlock] = []
    structured: dict[str, Any] = {}
    budget = max_chars
    if output:
        text = _cut(output, budget, "printed output")
        budget = max(0, budget - len(text))
        content.append(types.TextContent(type="text", text=text))
        structured["output"] = text
    if error is not None:
        content.append(types.TextContent(type="text", text=_cut(error_message(error), max(budget, 4096), "error")))
        structured["error"] = dict(error)
        return types.CallToolResult(content=content, structured_content=structured, is_error=True)
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    cut = _cut(text, max(budget, 1024), "result")
    if value is not None or not output:
        content.append(types.TextContent(type="text", text=cut))
    structured["result"] = value if cut is text else cut
    if cut is not text:
        structured["truncated"] = True
    content.extend(media)
    return types.CallToolResult(content=content, structured_content=structured, is_error=False)


def error_message(error: Mapping[str, Any]) -> str:
    """``ZeroDivisionError: division by zero (line 3: x = 1/0)``."""
    text = f"{error.get('type', 'Error')}: {error.get('message', '')}"
    if error.get("line"):
        source = f": {error['source'].strip()}" if error.get("source") else ""
        text += f" (line {error['line']}{source})"
    return text


def _cut(text: str, limit: int, what: str) -> str:
    if len(text) <= limit:
        return text
    return (
        text[:limit]
        + f"\n... [{what} cut: showing {limit:,} of {len(text):,} characters; return less, e.g. slice or select fields]"
    )


def _extract_media(value: Any, media: list[types.ContentBlock], depth: int = 0) -> Any:
    """Move image/audio/resource dicts into ``media``; leave a marker naming the content index."""
    if depth > 4:
        return value
    if isinstance(value, list):
        return [_extract_media(v, media, depth + 1) for v in value]
    if not isinstance(value, dict):
        return value
    block = _media_block(value)
    if block is None:
        return {k: _extract_media(v, media, depth + 1) for k, v in value.items()}
    media.append(block)
    marker = {"type": value["type"], "content": f"attached as MCP content #{len(media)}"}
    for key in ("mimeType", "uri", "name"):
        if key in value:
            marker[key] = value[key]
    if value["type"] == "resource" and isinstance(value.get("resource"), dict):
        marker["uri"] = value["resource"].get("uri")
    return marker


def _media_block(value: dict[str, Any]) -> types.ContentBlock | None:
    kind = value.get("type")
    if kind not in MEDIA_TYPES:
        return None
    try:
        if kind in ("image", "audio"):
            base64.b64decode(value["data"], validate=True)
            cls = types.ImageContent if kind == "image" else types.AudioContent
            return cls(type=kind, data=value["data"], mime_type=value["mimeType"])
        if kind == "resource_link":
            return types.ResourceLink.model_validate(value)
        return types.EmbeddedResource.model_validate(value)
    except (KeyError, TypeError, ValueError):
        return None  # only looks like media: it stays ordinary data
