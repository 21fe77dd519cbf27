"""The review page's side-by-side layout of a held tool's diff (the control plane's own unified diff)."""

from __future__ import annotations

from onetool.serve.ui._review import side_by_side
from onetool.state.fingerprint import describe_change


def texts(diff: str) -> list[tuple[str, str, str, str]]:
    return [(r.left.kind, r.left.text, r.right.kind, r.right.text) for r in side_by_side(diff)]


def test_a_changed_line_sits_beside_what_replaced_it_and_an_unpaired_one_beside_a_gap() -> None:
    old = '{"description": "Look up a term.", "inputSchema": {"type": "object"}, "name": "lookup"}'
    new = '{"description": "Look\\u200b up.", "inputSchema": {"type": "object"}, "name": "lookup", "title": "x"}'
    rows = texts(describe_change(old, new))
    assert (
        "removed",
        '  "description": "Look up a term.",',
        "added",
        '  "description": "Look<U+200B ZERO WIDTH SPACE> up.",',
    ) in rows
    assert ("gap", "", "added", '  "title": "x"') in rows
    assert all(kind in ("same", "note", "removed", "gap") for kind, *_ in rows)


def test_a_cut_diff_says_so_across_both_columns() -> None:
    rows = texts("@@ -1 +1 @@\n-a\n+b\n... (12 more diff lines)")
    assert rows == [
        ("note", "@@ -1 +1 @@", "note", "@@ -1 +1 @@"),
        ("removed", "a", "added", "b"),
        ("note", "... (12 more diff lines)", "note", "... (12 more diff lines)"),
    ]
