"""An upstream's structured results checked against its tools' output schemas within bounds, in place of the SDK's.

The SDK checks each structured result with python-jsonschema on the event loop, tens of microseconds a value with
every error collected, and first lists the server's tools again when its own cache lacks the tool (the pool keeps
the catalogue, and turns the SDK's cache off). A result of 400,000 numbers held every other client for seconds.
Here the result is checked as arguments are (:mod:`onetool.schemas.validation`): measured, and validated by
jsonschema-rs up to MAX_VALUES values; a larger one is passed on as the data it is, unchecked (it goes to a
snippet, never on to an upstream).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from mcp import types

from onetool.schemas.validation import MAX_VALUES, Validator, measure

__all__ = ["ResultCheck"]

_UNCAPPED = 1 << 62


class ResultCheck:
    """What the SDK's ``validate_tool_result`` does, bounded; ``tools`` is the connection's current catalogue."""

    def __init__(self, tools: Callable[[], Sequence[types.Tool]]) -> None:
        self._tools = tools
        self._compiled: dict[str, tuple[Any, Validator | None]] = {}
        """Per tool: the output schema it was compiled from (a changed catalogue brings a new one), its validator."""

    async def __call__(self, name: str, result: types.CallToolResult) -> None:
        schema = next((tool.output_schema for tool in self._tools() if tool.name == name), None)
        if schema is None:
            return
        structured = result.structured_content
        if structured is None and "structured_content" not in result.model_fields_set:
            raise RuntimeError(f"Tool {name} has an output schema but did not return structured content")
        if measure(structured, MAX_VALUES, _UNCAPPED)[0] > MAX_VALUES:
            return
        problem = None if (validator := self._validator(name, schema)) is None else validator.problem(structured)
        if problem is not None:
            where, message = problem
            raise RuntimeError(f"Invalid structured content returned by tool {name}: {where or '(all)'}: {message}")

    def _validator(self, name: str, schema: dict[str, Any]) -> Validator | None:
        compiled = self._compiled.get(name)
        if compiled is None or compiled[0] is not schema:
            compiled = self._compiled[name] = (schema, Validator.of(schema))
        return compiled[1]
