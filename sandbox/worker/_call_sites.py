"""The pack calls a snippet's source shows, found by the worker so the host never parses snippet code.

Parsing is snippet-sized work (a 99 KB f-string with 33,000 fields costs the parser a second), so it happens
in the worker, under the run's CPU and memory limits. Before the snippet starts, the worker sends the host
one `sites` frame (sandbox/protocol/sites.py) listing each visible `name.attr(...)` call whose `name` the
snippet does not bind itself and that is no builtin or module: the host checks them against its registry
(unknown pack or tool, unknown or missing argument) and ends the run with a precise error before any call is
answered. Calls past the frame's bounds are checked when made.
"""

from __future__ import annotations

import ast
import builtins
import sys
from collections.abc import Collection

from sandbox.protocol.errors import SNIPPET_ERRORS
from sandbox.protocol.sites import MAX_SITE_NAMES, MAX_SITES, Site, bound_names

__all__ = ["call_sites"]

_KNOWN_NAMES = frozenset(dir(builtins)) | frozenset(sys.stdlib_module_names) | frozenset(SNIPPET_ERRORS)
"""Names a snippet may call methods on that are not packs: calls on them are not pack calls."""


def call_sites(tree: ast.Module, packs: Collection[str]) -> list[Site]:
    """The pack calls visible in `tree`, in source order, within the frame's bounds."""
    bound = bound_names(tree)
    sites: list[Site] = []
    names = 0
    for node in ast.walk(tree):
        if not (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and isinstance(node.func.value, ast.Name)
            and node.func.value.id not in bound
            and (node.func.value.id in packs or node.func.value.id not in _KNOWN_NAMES)
        ):
            continue
        hidden = any(isinstance(a, ast.Starred) for a in node.args) or any(k.arg is None for k in node.keywords)
        keywords = None if hidden else [k.arg for k in node.keywords if k.arg is not None]
        names += len(keywords or ())
        if len(sites) >= MAX_SITES or names > MAX_SITE_NAMES:
            break
        sites.append((node.func.value.id, node.func.attr, len(node.args), keywords, node.lineno, node.col_offset + 1))
    sites.sort(key=lambda site: (site[4], site[5]))
    return sites
