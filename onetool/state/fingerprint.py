"""Tool fingerprints for rug-pull detection: a tool whose description or schemas change after approval is held.

The fingerprint covers everything a model reads or a caller relies on: name, title, description, input and
output schemas, and annotations. It is the sha256 of the canonical JSON (sorted keys, no whitespace, ASCII
escapes), so dict key order or an SDK's field order never changes it, and any changed character does.
"""

from __future__ import annotations

import difflib
import hashlib
import json
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # `mcp` takes about a second to import; the CLI must not pay for it here
    from mcp.types import Tool

__all__ = ["DIFF_LINES", "FINGERPRINTED", "canonical_json", "describe_change", "fingerprint_of", "tool_fingerprint"]

FINGERPRINTED = ("name", "title", "description", "inputSchema", "outputSchema", "annotations")
DIFF_LINES = 40


def canonical_json(tool: Tool) -> str:
    """The tool's fingerprinted fields as canonical JSON: what ``ApprovedTool.definition`` stores."""
    data = tool.model_dump(mode="json", by_alias=True, exclude_none=True)
    return _dumps({key: data[key] for key in FINGERPRINTED if key in data})


def tool_fingerprint(tool: Tool) -> str:
    return fingerprint_of(canonical_json(tool))


def fingerprint_of(definition: str) -> str:
    """The fingerprint of a canonical JSON definition (as stored)."""
    return hashlib.sha256(definition.encode("ascii")).hexdigest()


def describe_change(old: str, new: str, *, max_lines: int = DIFF_LINES) -> str:
    """A short unified diff of two canonical tool definitions, for the log and the admin's review."""
    diff = list(difflib.unified_diff(_pretty(old), _pretty(new), fromfile="approved", tofile="now", n=1, lineterm=""))
    if len(diff) > max_lines:
        diff = [*diff[:max_lines], f"... ({len(diff) - max_lines} more diff lines)"]
    return "\n".join(diff)


def _dumps(value: Any) -> str:
    # ensure_ascii: an upstream string may hold lone surrogates, which could not be encoded as UTF-8
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True)


def _pretty(definition: str) -> list[str]:
    text = json.dumps(json.loads(definition), sort_keys=True, indent=2, ensure_ascii=False)
    # readable non-ASCII, but a lone surrogate stays an escape so the diff can be printed and logged
    return text.encode("utf-8", "backslashreplace").decode("utf-8").splitlines()
