"""The `sites` frame: the pack calls a snippet's source shows, in the shape both sides agree on.

The worker finds them (sandbox/worker/_call_sites.py), so the host never parses snippet code, and sends one
`sites` frame before the snippet starts; the host checks each site's shape here (`is_site`, it trusts nothing
the worker sends) and then against its registry. The frame is bounded (MAX_SITES sites, MAX_SITE_NAMES keyword
names in all); calls past the bounds are checked when made.
"""

from __future__ import annotations

import ast
from typing import Any

__all__ = ["MAX_SITES", "MAX_SITE_NAMES", "Site", "bound_names", "is_site"]

MAX_SITES = 1_000
"""Call sites one frame lists."""
MAX_SITE_NAMES = 4_000
"""Keyword names all the sites of one frame carry."""

Site = tuple[str, str, int, "list[str] | None", int, int]
"""(pack, tool, positional count, keyword names or None when *args/**kwargs hide them, line, column)."""


def is_site(item: Any) -> bool:
    """Whether a decoded item from the worker has a site's shape (the host trusts nothing it sends)."""
    return (
        isinstance(item, list)
        and len(item) == 6
        and isinstance(item[0], str)
        and isinstance(item[1], str)
        and all(type(item[i]) is int and 0 <= item[i] < 1 << 31 for i in (2, 4, 5))
        and (
            item[3] is None
            or (
                isinstance(item[3], list)
                and len(item[3]) <= MAX_SITE_NAMES
                and all(isinstance(k, str) for k in item[3])
            )
        )
    )


def bound_names(tree: ast.AST) -> set[str]:
    """Every name a snippet itself binds (an assignment, an import, a function, class or parameter, an ``except ...
    as``, a ``match`` capture): a local variable called like a pack is not a pack call, nor a read of a pack."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store | ast.Del):
            names.add(node.id)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
        elif isinstance(node, ast.alias):
            names.add((node.asname or node.name).split(".")[0])
        elif isinstance(node, ast.ExceptHandler | ast.MatchAs | ast.MatchStar) and node.name:
            names.add(node.name)
        elif isinstance(node, ast.MatchMapping) and node.rest:
            names.add(node.rest)
        elif isinstance(node, ast.Global | ast.Nonlocal):
            names.update(node.names)
    return names
