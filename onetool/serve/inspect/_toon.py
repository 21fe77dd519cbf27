"""Results of the inspect face: data as TOON text for the model, the raw value as ``structuredContent``.

TOON (``toon-format``, the reference implementation) writes the JSON data model with fewer tokens, mostly by
turning arrays of uniform objects into tables. The model reads the TOON text; a program reads
``structuredContent``. ``structuredContent`` must be an object, so any other value is wrapped as
``{"result": value}``, as the MCP Python SDK wraps a tool's non-object return value; the TOON text encodes the
value itself.

For an upstream result (:func:`exec_result`):

- ``structuredContent`` is the data when the upstream sent it (its text parts, which carry the same data
  serialised, are dropped); otherwise, when a text part parses as a JSON object or array, the text parts are
  data: one part is its value, several are the list of their values (text that is not JSON is a string there).
- Text that is not JSON stays text; images, audio, embedded resources and resource links pass through as the
  upstream sent them.
- An ``isError`` result keeps the upstream's message, with ``isError``.

Text is cut at ``max_chars`` in all, as ``run`` cuts its result, with a note saying how much was cut and how to
ask for less; a cut data result carries the cut text in ``structuredContent`` with ``"truncated": true``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import toon_format
from mcp import types

from onetool.registry.results import error_text, parse_text, to_value
from onetool.text import cut

DEFAULT_MAX_CHARS = 256 * 1024
"""The default text budget of one result: the same as ``run``'s."""

_HINT = "ask for less, e.g. with the tool's limit, page or filter arguments"


def exec_result(
    result: types.CallToolResult,
    *,
    max_chars: int = DEFAULT_MAX_CHARS,
    output_schema: Mapping[str, Any] | None = None,
) -> types.CallToolResult:
    """The inspect face's answer for one upstream tool result.

    With the tool's ``output_schema``, the Python SDK's ``{"result": X}`` envelope around a non-object value is
    read as ``X``, as ``run`` reads it: the TOON text is the value itself, and structuredContent is the same
    envelope again.
    """
    if result.is_error:
        text = types.TextContent(type="text", text=cut(error_text(result), max_chars, "error message"))
        return types.CallToolResult(content=[text], is_error=True)
    media = [c for c in result.content if not isinstance(c, types.TextContent)]
    if result.structured_content is not None:
        return _with_media(data_result(to_value(result, output_schema), max_chars=max_chars), media)
    texts = [c.text for c in result.content if isinstance(c, types.TextContent)]
    values = [parse_text(t) for t in texts]
    if not any(isinstance(v, dict | list) for v in values):
        return types.CallToolResult(content=_cut_texts(result.content, max_chars))
    return _with_media(data_result(values[0] if len(values) == 1 else values, max_chars=max_chars), media)


def data_result(value: Any, *, structured: Any = None, max_chars: int = DEFAULT_MAX_CHARS) -> types.CallToolResult:
    """``value`` as TOON text, and as ``structuredContent`` the data for programs: ``structured`` when given
    (``inspect``'s raw schemas beside the compressed ones it shows the model), else ``value`` itself."""
    text = toon_format.encode(value)
    shown = cut(text, max_chars, hint=_HINT)
    if shown is text:
        data = value if structured is None else structured
        structured = data if isinstance(data, dict) else {"result": data}
    else:
        structured = {"result": shown, "truncated": True}
    return types.CallToolResult(content=[types.TextContent(type="text", text=shown)], structured_content=structured)


def _cut_texts(blocks: list[types.ContentBlock], max_chars: int) -> list[types.ContentBlock]:
    """Text blocks cut to share ``max_chars`` in order (the note may pass it); other blocks unchanged."""
    budget = max_chars
    out: list[types.ContentBlock] = []
    for block in blocks:
        if isinstance(block, types.TextContent):
            text = cut(block.text, budget, hint=_HINT)
            budget = max(0, budget - len(block.text))
            block = block if text is block.text else types.TextContent(type="text", text=text)
        out.append(block)
    return out


def _with_media(result: types.CallToolResult, media: Sequence[types.ContentBlock]) -> types.CallToolResult:
    return result.model_copy(update={"content": [*result.content, *media]}) if media else result
