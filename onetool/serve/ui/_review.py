"""What the review page shows of one held tool: its change side by side, its text with invisible characters named,
and the gateway's findings on it.

The diff is the one the control plane already made (``HeldTool.diff``: a unified diff of the approved definition
and the current one); here it is only laid out in two columns, a removed line beside the added line that replaced
it. Every text an upstream wrote goes through :func:`onetool.text.visible` first (and Jinja2 escapes it): a reviewer
sees a zero-width space or a bidi override as a named marker, not as nothing.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from itertools import zip_longest
from typing import Literal

from onetool.control import HeldTool
from onetool.control.findings import MAX_SCANNED, Finding, scan_tool
from onetool.text import visible

__all__ = ["Row", "ToolReview", "review", "side_by_side"]

Side = Literal["same", "removed", "added", "gap", "note"]


@dataclass(frozen=True)
class Cell:
    kind: Side
    text: str


@dataclass(frozen=True)
class Row:
    left: Cell
    right: Cell


@dataclass(frozen=True)
class ToolReview:
    server: str
    tool: str
    reason: str
    description: str
    input_schema: str
    rows: list[Row] = field(default_factory=list)
    """The change side by side (empty for a tool of a quarantined server: everything in it is new)."""
    findings: list[Finding] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return self.reason == "changed after approval"


def review(held: HeldTool) -> ToolReview:
    changed = held.diff is not None
    schema = json.dumps(held.input_schema, indent=2, ensure_ascii=False)
    return ToolReview(
        server=held.server,
        tool=held.tool,  # as its form sends it back; the page marks what a reader would not see
        reason=held.reason,
        description=visible(held.description[:MAX_SCANNED]),
        input_schema=visible(schema[:MAX_SCANNED]),
        rows=side_by_side(held.diff) if held.diff is not None else [],
        findings=scan_tool(held.description, held.input_schema, changed=changed),
    )


_GAP = Cell("gap", "")


def side_by_side(diff: str) -> list[Row]:
    """A unified diff as rows of (approved, now): context on both sides, each run of removed lines beside the run of
    added lines after it; hunk headers and notes (the diff cut short) across both."""
    rows: list[Row] = []
    removed: list[str] = []
    added: list[str] = []

    def flush() -> None:
        for old, new in zip_longest(removed, added):
            rows.append(
                Row(Cell("removed", old) if old is not None else _GAP, Cell("added", new) if new is not None else _GAP)
            )
        removed.clear()
        added.clear()

    for raw in diff.splitlines():
        line = visible(raw, keep="\t")
        if raw.startswith(("---", "+++")):
            continue  # the file names: "approved" and "now", the columns' headings
        if raw.startswith("-"):
            if added:  # a removal after additions starts a new pair of runs
                flush()
            removed.append(line[1:])
        elif raw.startswith("+"):
            added.append(line[1:])
        else:
            flush()
            if raw.startswith(" "):
                rows.append(Row(Cell("same", line[1:]), Cell("same", line[1:])))
            else:  # "@@ ... @@", or "... (n more diff lines)"
                rows.append(Row(Cell("note", line), Cell("note", line)))
    flush()
    return rows
