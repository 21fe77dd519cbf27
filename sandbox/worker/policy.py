"""Language layer, compile time: parse a snippet and rewrite it with RestrictedPython's policy.

Every attribute, item, iteration and import goes through a guard from sandbox.worker._guards; names and
attributes starting with '_' are refused here, before anything runs, with a message a model can act on. The
exceptions: a snippet class defines the dunder methods of ALLOWED_DUNDER_METHODS, and reads
READABLE_DUNDERS (``type(e).__name__``, ``e.__class__``, ``f.__doc__``), which the guard answers with text or a
type the snippet could name anyway.
"""

from __future__ import annotations

import ast
import re
import secrets
import warnings
from collections.abc import Collection, Iterable, Mapping
from types import CodeType
from typing import Any, TypeAlias, TypedDict

from RestrictedPython._types import T_pos_ast
from RestrictedPython.transformer import INSPECT_ATTRIBUTES, RestrictingNodeTransformer, copy_locations

from sandbox.worker._exports import ALLOWED_MODULES, EXPORTS

__all__ = [
    "ALLOWED_DUNDER_METHODS",
    "ALLOWED_MODULES",
    "FILENAME",
    "FORBIDDEN_NAMES",
    "GUARD_NAMES",
    "INTERNALS_HINT",
    "MAX_NODES",
    "PRIVATE_HINT",
    "READABLE_DUNDERS",
    "RESULT_NAME",
    "SYNC_HINT",
    "CompileFailure",
    "SnippetPolicy",
    "Visited",
    "capture_last_value",
    "compile_restricted",
    "import_message",
    "internals_message",
    "missing_name_message",
    "parse",
    "private_name_message",
]

FILENAME = "<snippet>"
MAX_NODES = 25_000
"""Syntax nodes of one snippet: a few thousand in one of hundreds of lines; a snippet of code's 100,000 characters
spelled out as data or calls holds 20,000 to 60,000."""
RESULT_NAME = "_snippet_value_"
"""Where the last expression's value lands; snippet code cannot name it (it starts with '_')."""


GUARD_NAMES = frozenset(
    {
        "__metaclass__",
        "_getattr_",
        "_getitem_",
        "_getiter_",
        "_write_",
        "_inplacevar_",
        "_augitem_",
        "_augattr_",
        "_apply_",
        "_iter_unpack_sequence_",
        "_unpack_sequence_",
        "_print_",
    }
)
"""The names the rewritten code calls. compile_restricted binds them as constants of the code object: were
they looked up at run time, a snippet that reached its globals dict could rebind `_getattr_` to anything."""

# Dunder methods a snippet may define in its own classes; their bodies are restricted code like any other.
ALLOWED_DUNDER_METHODS = frozenset(
    f"__{name}__"
    for name in [
        "init",
        "post_init",
        "repr",
        "str",
        "eq",
        "ne",
        "lt",
        "le",
        "gt",
        "ge",
        "hash",
        "bool",
        "len",
        "iter",
        "next",
        "contains",
        "getitem",
        "setitem",
        "delitem",
        "call",
        "enter",
        "exit",
        "add",
        "sub",
        "mul",
        "truediv",
        "floordiv",
        "mod",
        "pow",
        "neg",
        "pos",
        "abs",
        "radd",
        "rsub",
        "rmul",
        "rtruediv",
        "iadd",
        "isub",
        "imul",
        "and",
        "or",
        "xor",
        "format",
    ]
)

READABLE_DUNDERS = frozenset({"__name__", "__doc__", "__class__"})
"""Dunder attributes a snippet may read (never write or delete), as error handling needs them: ``__name__`` and
``__doc__`` only as text (or None), ``__class__`` only as ``type()`` gives it (a type the snippet could name:
a builtin, a class of an allowed module, its own class, an exception class). Every other dunder stays refused,
so none of them is a step towards ``__base__``, ``__mro__``, ``__subclasses__`` or ``__globals__``."""

FORBIDDEN_NAMES = {
    "open": "the sandbox has no files; get outside data through the packs and return results as the value",
    "eval": "write the code directly instead of building it as a string",
    "exec": "write the code directly instead of building it as a string",
    "compile": "write the code directly instead of building it as a string",
    "globals": "namespaces cannot be inspected; use your variables directly",
    "locals": "namespaces cannot be inspected; use your variables directly",
    "vars": "namespaces cannot be inspected; use your variables directly",
    "breakpoint": "there is no debugger; print values instead",
    "input": "there is no input; pass data in the snippet",
    "help": "there is no interactive help; call dir() on a pack to list its tools",
    "exit": "the snippet ends by itself; its last expression is the result",
    "quit": "the snippet ends by itself; its last expression is the result",
    "memoryview": "raw memory access is off limits",
}

SYNC_HINT = "pack calls are synchronous, so call `pack.tool(...)` directly and use its result"
PRIVATE_HINT = (
    "names starting with '_' are private (but __name__, __doc__ and __class__ may be read). Use the value's public "
    "methods instead."
)
INTERNALS_HINT = "frame, code and generator internals are off limits."


def private_name_message(name: str) -> str:
    return f"'{name}' is not allowed: {PRIVATE_HINT}"


def internals_message(name: str) -> str:
    return f"'{name}' is not allowed: {INTERNALS_HINT}"


def missing_name_message(module: str, name: str) -> str:
    return f"module '{module}' has no '{name}' in the sandbox; it has: {', '.join(sorted(EXPORTS[module]))}"


def import_message(name: str) -> str:
    return f"import of '{name}' is not allowed; allowed modules: {', '.join(ALLOWED_MODULES)}"


class CompileFailure(Exception):
    """Why a snippet does not compile: its error type, message and place."""

    # Not a dataclass: the fork-server would import dataclasses, and inspect with it, for this one class.
    def __init__(self, type: str, message: str, line: int | None, column: int | None) -> None:
        super().__init__(type, message, line, column)
        self.type = type
        self.message = message
        self.line = line
        self.column = column


Visited: TypeAlias = ast.AST | Iterable[ast.AST] | None
"""What RestrictedPython's visitors return: a node, nodes in its place, or nothing (the node is dropped)."""

_UNDERSCORE = re.compile(r'"(?P<name>[^"]+)" is an invalid (variable|attribute) name because it starts with "_"')
_INSPECT = re.compile(r'"(?P<name>[^"]+)" is a restricted name')


class SnippetPolicy(RestrictingNodeTransformer):
    """RestrictedPython's transformer, friendlier where usability costs no safety."""

    def __init__(self, packs: Collection[str] = ()) -> None:
        super().__init__()
        self.failures: list[CompileFailure] = []
        # A registered pack name is never private, even when sanitising made it start with '_' (`123x` ->
        # `_123x`); dunder and guard names stay refused, so a pack can never stand in for a guard.
        self.packs = frozenset(p for p in packs if not p.startswith("__") and p not in GUARD_NAMES)

    def error(self, node: ast.AST, info: str) -> None:
        if match := _UNDERSCORE.search(info):
            info = private_name_message(match["name"])
        elif match := _INSPECT.search(info):
            info = internals_message(match["name"])
        elif info in ("Exec calls are not allowed.", "Eval calls are not allowed."):
            return  # visit_Name already reported these names with a hint
        self.failures.append(CompileFailure("PolicyError", info, getattr(node, "lineno", None), _column(node)))
        super().error(node, info)

    def check_name(self, node: T_pos_ast, name: str | None, allow_magic_methods: bool = False) -> None:
        if allow_magic_methods and name in ALLOWED_DUNDER_METHODS:
            return
        super().check_name(node, name)

    def visit_Name(self, node: ast.Name) -> Visited:
        if isinstance(node.ctx, ast.Load) and node.id in self.packs:
            return node
        if isinstance(node.ctx, ast.Load) and node.id in FORBIDDEN_NAMES:
            self.error(node, f"'{node.id}' is not allowed: {FORBIDDEN_NAMES[node.id]}.")
        return super().visit_Name(node)

    def visit_Attribute(self, node: ast.Attribute) -> Visited:
        # `super().__init__(...)` is how snippet classes extend Exception and friends, and `type(e).__name__` is
        # how error handling names an error; the guard allows the same narrow cases at run time (and nothing
        # else of what these reads lead to).
        super_method = (
            node.attr in ALLOWED_DUNDER_METHODS
            and isinstance(node.value, ast.Call)
            and isinstance(node.value.func, ast.Name)
            and node.value.func.id == "super"
        )
        if (super_method or node.attr in READABLE_DUNDERS) and isinstance(node.ctx, ast.Load):
            new_node = ast.Call(
                func=ast.Name("_getattr_", ast.Load()),
                args=[self.visit(node.value), ast.Constant(node.attr)],
                keywords=[],
            )
            copy_locations(new_node, node)
            return new_node
        return super().visit_Attribute(node)

    def visit_Import(self, node: ast.Import) -> Visited:
        for alias in node.names:
            self._check_module(node, alias.name)
        return super().visit_Import(node)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> Visited:
        module = "." * node.level + (node.module or "")
        self._check_module(node, module)
        for alias in node.names if module in EXPORTS else ():
            if alias.name != "*" and alias.name not in EXPORTS[module]:
                self.error(node, missing_name_message(module, alias.name))
        return super().visit_ImportFrom(node)

    def _check_module(self, node: ast.AST, name: str) -> None:
        if name not in ALLOWED_MODULES:
            self.error(node, import_message(name))

    def visit_AugAssign(self, node: ast.AugAssign) -> Visited:
        """`d[k] += 1` and `obj.n += 1` become one guarded helper call; names keep RestrictedPython's way."""
        target = node.target
        if isinstance(target, ast.Name):
            return super().visit_AugAssign(node)
        op = ast.Constant(_OPERATORS[type(node.op)])
        if isinstance(target, ast.Subscript):
            if isinstance(target.slice, ast.Slice):
                self.error(node, "augmented assignment to a slice is not supported; write `x[a:b] = x[a:b] + y`")
                return node
            helper, args = "_augitem_", [self.visit(target.value), self.visit(target.slice)]
        else:
            assert isinstance(target, ast.Attribute)
            self.check_name(target, target.attr)
            if target.attr in INSPECT_ATTRIBUTES:
                self.error(target, internals_message(target.attr))
            helper, args = "_augattr_", [self.visit(target.value), ast.Constant(target.attr)]
        call = ast.Call(func=ast.Name(helper, ast.Load()), args=[*args, op, self.visit(node.value)], keywords=[])
        new_node = ast.Expr(call)
        copy_locations(new_node, node)
        ast.fix_missing_locations(new_node)
        return new_node

    def visit_Module(self, node: ast.Module) -> ast.Module:
        tree = super().visit_Module(node)
        assert isinstance(tree, ast.Module), "RestrictedPython returns the module it visited"
        # A refused node may have been dropped from the tree; with failures it is never compiled anyway.
        return tree if self.failures else capture_last_value(tree)

    def visit_Await(self, node: ast.Await) -> ast.AST:
        self.error(node, f"'await' is not needed: {SYNC_HINT}")
        return node

    def visit_AsyncFunctionDef(self, node: ast.AsyncFunctionDef) -> ast.AST:
        self.error(node, f"'async def' is not needed: {SYNC_HINT}")
        return node

    def visit_AsyncFor(self, node: ast.AsyncFor) -> ast.AST:
        self.error(node, f"'async for' is not needed: {SYNC_HINT}")
        return node

    def visit_AsyncWith(self, node: ast.AsyncWith) -> ast.AST:
        self.error(node, f"'async with' is not needed: {SYNC_HINT}")
        return node


_OPERATORS: dict[type[ast.operator], str] = {
    ast.Add: "+=",
    ast.Sub: "-=",
    ast.Mult: "*=",
    ast.Div: "/=",
    ast.FloorDiv: "//=",
    ast.Mod: "%=",
    ast.Pow: "**=",
    ast.LShift: "<<=",
    ast.RShift: ">>=",
    ast.BitAnd: "&=",
    ast.BitOr: "|=",
    ast.BitXor: "^=",
    ast.MatMult: "@=",
}


def capture_last_value(tree: ast.Module) -> ast.Module:
    """Turn a final expression statement into an assignment to RESULT_NAME."""
    if tree.body and isinstance(tree.body[-1], ast.Expr):
        last = tree.body[-1]
        # The value keeps its own locations; only the two new nodes need some. Not copy_locations or
        # fix_missing_locations: both walk the whole expression again, a second pass over the snippet.
        target = ast.Name(RESULT_NAME, ast.Store(), **_locations(last))
        tree.body[-1] = ast.Assign(targets=[target], value=last.value, **_locations(last))
    return tree


class _Locations(TypedDict):
    lineno: int
    col_offset: int
    end_lineno: int | None
    end_col_offset: int | None


def _locations(node: ast.stmt) -> _Locations:
    return {
        "lineno": node.lineno,
        "col_offset": node.col_offset,
        "end_lineno": node.end_lineno,
        "end_col_offset": node.end_col_offset,
    }


def _column(node: ast.AST) -> int | None:
    offset = getattr(node, "col_offset", None)
    return None if offset is None else offset + 1


def parse(code: str) -> ast.Module:
    """The syntax tree of a snippet of at most MAX_NODES nodes: what the pre-check and the policy do next costs
    some microseconds a node (an f-string of 33,000 fields took the worker seconds to check and compile)."""
    try:
        tree = ast.parse(code, FILENAME, "exec")
    except SyntaxError as exc:
        raise CompileFailure(type(exc).__name__, str(exc.msg), exc.lineno, exc.offset) from None
    except (ValueError, MemoryError, RecursionError) as exc:
        raise CompileFailure("SyntaxError", f"the code cannot be parsed: {exc}", None, None) from None
    for count, _ in enumerate(ast.walk(tree)):
        if count == MAX_NODES:
            raise CompileFailure(
                "LimitError",
                f"the code has more than {MAX_NODES:,} syntax nodes, more than the sandbox compiles; write it "
                "shorter (build data in a loop, or fetch it with a pack call, rather than spelling it out)",
                None,
                None,
            )
    return tree


def compile_restricted(code: str | ast.Module, guards: Mapping[str, Any], packs: Collection[str] = ()) -> CodeType:
    """Compile under the policy, with `guards` (one per GUARD_NAMES) bound into the code as constants.

    `code` is the source, or the tree `parse` made of it (which the policy then rewrites in place).
    `packs` are the names of the run's packs, which the snippet may use even when they start with '_'.
    Raises CompileFailure (SyntaxError or PolicyError) with the first problem."""
    tree = parse(code) if isinstance(code, str) else code
    policy = SnippetPolicy(packs)
    tree = policy.visit(tree)
    if policy.failures:
        raise policy.failures[0]
    # Each guard reference becomes a string constant no snippet can spell (a fresh token per compile), and
    # after compiling, that constant is swapped for the guard itself: LOAD_CONST, no name to rebind.
    tokens = {name: f"\0guard-{secrets.token_hex(16)}:{name}" for name in GUARD_NAMES}
    tree = _GuardConstants(tokens).visit(tree)
    try:
        with warnings.catch_warnings():
            # "'str' object is not callable": true until the constants are swapped.
            warnings.simplefilter("ignore", SyntaxWarning)
            compiled = compile(tree, FILENAME, "exec")
    except SyntaxError as exc:  # what only the compiler sees: `break` outside a loop, `return` outside a function
        raise CompileFailure(type(exc).__name__, str(exc.msg), exc.lineno, exc.offset) from None
    except (ValueError, RecursionError) as exc:
        raise CompileFailure("SyntaxError", f"the code cannot be compiled: {exc}", None, None) from None
    return _bind(compiled, {token: guards[name] for name, token in tokens.items()})


class _GuardConstants(ast.NodeTransformer):
    def __init__(self, tokens: Mapping[str, str]) -> None:
        self.tokens = tokens

    def visit_Name(self, node: ast.Name) -> ast.AST:
        if isinstance(node.ctx, ast.Load) and node.id in self.tokens:
            return ast.copy_location(ast.Constant(self.tokens[node.id]), node)
        return node


def _bind(code: CodeType, values: Mapping[str, Any]) -> CodeType:
    consts = tuple(
        _bind(const, values)
        if isinstance(const, CodeType)
        else values.get(const, const)
        if type(const) is str
        else const
        for const in code.co_consts
    )
    return code.replace(co_consts=consts)
