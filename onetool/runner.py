"""run(code): static pre-check -> sandbox -> shaped MCP result.

The pre-check parses the snippet with :mod:`ast` and checks every
``pack.tool(...)`` call it can see against the registry, so an unknown pack or
tool, or an unknown or missing argument, is reported before anything runs,
with what exists instead. The snippet then runs in a sandbox worker; each pack
call comes back here through :meth:`Runner.on_call`.
"""

from __future__ import annotations

import ast
import builtins
import inspect
import sys
import uuid
from collections.abc import Callable
from typing import Any

from mcp import types

from onetool.errors import ArgumentError, ModelError
from onetool.logs import LogSpan, logger
from onetool.packs import PackContext, Registry, Tool, invoke
from onetool.results import run_result
from sandbox import TOOL_ERRORS, Limits, RunError, Sandbox, ToolError

MAX_CODE_CHARS = 100_000

_KNOWN_NAMES = set(dir(builtins)) | set(sys.stdlib_module_names) | {"ToolError"}


class Runner:
    """Runs snippets against the current registry; one instance per gateway."""

    def __init__(
        self,
        sandbox: Sandbox,
        registry: Callable[[], Registry],
        ctx: PackContext,
        limits: Limits,
        max_chars: int,
    ) -> None:
        self._sandbox = sandbox
        self._registry = registry
        self._ctx = ctx
        self._limits = limits
        self._max_chars = max_chars

    async def run(self, code: str) -> types.CallToolResult:
        run_id = uuid.uuid4().hex[:12]
        with logger.contextualize(runId=run_id), LogSpan("run", codeLength=len(code)) as span:
            registry = self._registry()
            error = precheck(code, registry)
            if error is not None:
                span.add(calls=0, status="FAILED", errorType=error["type"], errorMessage=error["message"])
                return run_result(None, "", error=error, max_chars=self._max_chars)
            try:
                outcome = await self._sandbox.run(
                    code, packs=registry.tool_names, on_call=self.on_call, limits=self._limits
                )
            except Exception as e:  # the sandbox promises not to raise; if it does, the gateway must not fall over
                logger.exception("sandbox failed")
                failure = {"type": "InternalError", "message": f"the sandbox failed: {type(e).__name__}: {e}"}
                span.add(status="FAILED", errorType="InternalError", errorMessage=str(e))
                return run_result(None, "", error=failure, max_chars=self._max_chars)
            span.add(calls=outcome.calls)
            if outcome.error is not None:
                failure = _error_dict(outcome.error)
                span.add(status="FAILED", errorType=failure["type"], errorMessage=failure["message"])
                return run_result(None, outcome.output, error=failure, max_chars=self._max_chars)
            return run_result(outcome.value, outcome.output, max_chars=self._max_chars)

    async def on_call(self, pack: str, tool: str, args: list[Any], kwargs: dict[str, Any]) -> Any:
        """A pack call from the sandbox; what it raises becomes a ToolError inside the snippet."""
        try:
            return await invoke(self._registry().resolve(pack, tool), args, kwargs, self._ctx)
        except ModelError as e:
            raise TOOL_ERRORS[e.snippet_type](str(e)) from None
        except Exception as e:  # a local pack's own bug: report it, keep the host's traceback out of the model
            logger.opt(exception=True).warning("local pack {}.{} raised", pack, tool)
            raise ToolError(f"{pack}.{tool} raised {type(e).__name__}: {e}") from None


def _error_dict(error: RunError) -> dict[str, Any]:
    out: dict[str, Any] = {"type": error.type, "message": error.message}
    if error.line is not None:
        out["line"] = error.line
    if error.source:
        out["source"] = error.source
    return out


# ---- static pre-check ------------------------------------------------------------------------


def precheck(code: str, registry: Registry) -> dict[str, Any] | None:
    """The first problem visible without running the code, as an error dict, or None."""
    if len(code) > MAX_CODE_CHARS:
        return {"type": "LimitError", "message": f"code is {len(code):,} characters; the limit is {MAX_CODE_CHARS:,}"}
    try:
        tree = ast.parse(code, "<snippet>")
    except SyntaxError as e:
        error: dict[str, Any] = {"type": type(e).__name__, "message": e.msg}
        if e.lineno:
            error.update(line=e.lineno, column=e.offset, source=(e.text or "").rstrip("\n"))
        return error
    except (ValueError, RecursionError, MemoryError) as e:
        return {"type": "SyntaxError", "message": f"cannot parse the code: {e or type(e).__name__}"}
    lines = code.splitlines()
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
        try:
            if pack in registry.packs:
                _check_call(registry.resolve(pack, tool), node)
            elif pack not in _KNOWN_NAMES:
                registry.resolve(pack, tool)
        except ModelError as e:
            line = node.lineno
            return {
                "type": type(e).__name__,
                "message": str(e),
                "line": line,
                "source": lines[line - 1] if line <= len(lines) else "",
            }
    return None


def _check_call(tool: Tool, call: ast.Call) -> None:
    if any(isinstance(a, ast.Starred) for a in call.args) or any(k.arg is None for k in call.keywords):
        return  # *args / **kwargs: only the run itself can tell
    names = [k.arg for k in call.keywords if k.arg is not None]
    if tool.schema is not None:
        tool.schema.check_shape(tool.signature, len(call.args), names)
    elif tool.python_signature is not None:
        params = [p for p in tool.python_signature.parameters.values() if p.name != "ctx"]
        try:
            inspect.Signature(params).bind(*call.args, **dict.fromkeys(names))
        except TypeError as e:
            raise ArgumentError(f"{tool.signature}: {e}") from None


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
