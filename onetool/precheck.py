"""The static check of a snippet before it runs.

The snippet is parsed exactly as the sandbox parses it (so a syntax error reads the same from either), and
every ``pack.tool(...)`` call visible in the source is checked against the registry: an unknown pack or
tool, or an unknown or missing argument, is reported with what exists instead, before anything runs.
Calls to a server that is not connected are left to the run, where they raise a catchable ToolUnavailable.
"""

from __future__ import annotations

import ast
import builtins
import sys

from onetool.errors import ModelError
from onetool.registry import Registry, Tool
from sandbox import SNIPPET_ERRORS, CompileFailure, RunError, parse

MAX_CODE_CHARS = 100_000

_KNOWN_NAMES = frozenset(dir(builtins)) | frozenset(sys.stdlib_module_names) | frozenset(SNIPPET_ERRORS)
"""Names a snippet may call methods on that are not packs: calls on them are not pack calls."""


def precheck(code: str, registry: Registry) -> RunError | None:
    """The first problem visible without running the code, or None."""
    if len(code) > MAX_CODE_CHARS:
        return RunError(
            "LimitError", f"code is {len(code):,} characters; the limit is {MAX_CODE_CHARS:,}", origin="host"
        )
    try:
        tree = parse(code)
    except CompileFailure as failure:
        return _error(failure.type, failure.message, failure.line, failure.column, code)
    defined = _bound_names(tree)
    for node in ast.walk(tree):
        if not (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and isinstance(node.func.value, ast.Name)
            and node.func.value.id not in defined
        ):
            continue
        pack, tool = node.func.value.id, node.func.attr
        found = registry.packs.get(pack)
        if found is None and pack in _KNOWN_NAMES:
            continue
        if found is not None and (status := registry.pack_status(found)) is not None and not status.connected:
            continue
        try:
            _check_call(registry.resolve(pack, tool), node)
        except ModelError as e:
            return _error(type(e).__name__, str(e), node.lineno, node.col_offset + 1, code)
    return None


def _check_call(tool: Tool, call: ast.Call) -> None:
    if any(isinstance(a, ast.Starred) for a in call.args) or any(k.arg is None for k in call.keywords):
        return  # *args / **kwargs: only the run itself can tell
    tool.check_shape(len(call.args), [k.arg for k in call.keywords if k.arg is not None])


def _error(kind: str, message: str, line: int | None, column: int | None, code: str) -> RunError:
    lines = code.splitlines()
    source = lines[line - 1] if line is not None and 0 < line <= len(lines) else None
    return RunError(kind, message, line, column, source, origin="host")


def _bound_names(tree: ast.AST) -> set[str]:
    """Every name the snippet itself binds: a local variable called like a pack is not a pack call."""
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
        elif isinstance(node, ast.ExceptHandler) and node.name:
            names.add(node.name)
        elif isinstance(node, ast.Global | ast.Nonlocal):
            names.update(node.names)
    return names
