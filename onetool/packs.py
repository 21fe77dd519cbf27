"""The pack registry: local packs and proxied servers under one naming scheme.

A *local pack* is a Python module (in the shipped ``packs/`` package or a
folder from ``packs.dirs``); its public functions are its tools. Every
configured server is a pack named ``to_identifier(server)``. When both share a
name, the local pack's tools win for the names it defines and the upstream's
other tools stay reachable (the shadowing is logged and listed).

A :class:`Registry` is an immutable snapshot; the gateway builds a new one
whenever an upstream catalogue or status changes.
"""

from __future__ import annotations

import difflib
import importlib
import importlib.util
import inspect
import pkgutil
import sys
import typing
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import TYPE_CHECKING, Any, Literal

import anyio.to_thread
from pydantic import BaseModel, ConfigDict, ValidationError, create_model
from pydantic_core import to_jsonable_python

from onetool.config import Config, to_identifier
from onetool.errors import ArgumentError, ConfigError, ToolFailed, UnknownPack, UnknownTool, UpstreamUnavailable
from onetool.logs import logger
from onetool.registry.schema import ToolSchema
from onetool.results import error_text, to_value

if TYPE_CHECKING:
    from mcp import types

    from onetool.upstream import ServerStatus, UpstreamPool

BUILTIN_PACKS = "packs"


@dataclass(frozen=True)
class PackContext:
    """Given to a local pack function that declares a keyword-only ``ctx`` parameter.

    Local packs are trusted host code: they may reach the config (and its
    secrets), the upstream pool and the current registry.
    """

    config: Config
    pool: UpstreamPool
    registry: Callable[[], Registry]


@dataclass(frozen=True)
class Tool:
    """One callable tool as a snippet sees it: ``pack.name(...)``."""

    pack: str
    name: str
    description: str
    signature: str
    source: Literal["local", "upstream"]
    # upstream tools
    server: str | None = None
    remote_name: str | None = None
    schema: ToolSchema | None = None
    output_schema: Mapping[str, Any] | None = None
    annotations: Mapping[str, Any] | None = None
    # local tools
    func: Callable[..., Any] | None = field(default=None, repr=False)
    python_signature: inspect.Signature | None = field(default=None, repr=False)
    wants_ctx: bool = False
    arguments: type[BaseModel] | None = field(default=None, repr=False)  # checks argument types

    @property
    def summary(self) -> str:
        """The description's first sentence or line, for compact listings."""
        first = self.description.strip().split("\n", 1)[0]
        head, dot, _ = first.partition(". ")
        return (head + "." if dot else first)[:160]


@dataclass(frozen=True)
class Pack:
    name: str
    tools: dict[str, Tool]
    server: str | None = None  # the configured server behind it, if any
    shadowed: dict[str, Tool] = field(default_factory=dict)  # upstream tools hidden by local ones


@dataclass(frozen=True)
class LocalPack:
    name: str
    path: str
    tools: dict[str, Tool]


class Registry:
    """Every pack and tool, resolved by the names snippets use."""

    def __init__(self, packs: Mapping[str, Pack], status: Mapping[str, ServerStatus] | None = None) -> None:
        self.packs = dict(sorted(packs.items()))
        self.tool_names = {name: sorted(pack.tools) for name, pack in self.packs.items()}  # the sandbox's stubs
        self._status = dict(status or {})

    def server_status(self, server: str) -> ServerStatus | None:
        return self._status.get(server)

    def resolve(self, pack: str, tool: str) -> Tool:
        found = self.packs.get(pack)
        if found is None:
            raise UnknownPack(f"unknown pack '{pack}'; available packs: {', '.join(self.packs) or 'none'}")
        hit = found.tools.get(tool)
        if hit is not None:
            return hit
        status = self._status.get(found.server) if found.server else None
        if status is not None and status.status != "connected":
            raise unavailable(status)
        names = list(found.tools)
        close = difflib.get_close_matches(tool, names, n=3, cutoff=0.5)
        ordered = close + [n for n in names if n not in close]
        hint = f"; did you mean {close[0]}?" if close else ""
        raise UnknownTool(
            f"pack '{pack}' has no tool '{tool}'{hint} Its tools: {', '.join(ordered) or 'none'}"
            f" (see proxy.list_tools(server='{pack}'))"
        )

    @classmethod
    def build(cls, local: Mapping[str, LocalPack], pool: UpstreamPool) -> Registry:
        """Merge local packs with the pool's current catalogue (local wins per tool name)."""
        packs = {name: Pack(name=name, tools=dict(lp.tools)) for name, lp in local.items()}
        status = {s.name: s for s in pool.status()}
        for server, st in status.items():
            upstream = _upstream_tools(st.pack, server, pool.tools(server))
            mine = packs.get(st.pack)
            if mine is None:
                packs[st.pack] = Pack(name=st.pack, tools=upstream, server=server)
                continue
            shadowed = {n: t for n, t in upstream.items() if n in mine.tools}
            tools = {**upstream, **mine.tools}
            packs[st.pack] = Pack(name=st.pack, tools=tools, server=server, shadowed=shadowed)
        return cls(packs, status)

    def log_shadowing(self) -> None:
        for pack in self.packs.values():
            if pack.server is not None and any(t.source == "local" for t in pack.tools.values()):
                logger.bind(pack=pack.name, server=pack.server, shadowed=sorted(pack.shadowed)).info(
                    "local pack '{}' shares its name with server '{}': local tools win",
                    pack.name,
                    pack.server,
                )


def unavailable(status: ServerStatus) -> UpstreamUnavailable:
    """The error for a call to a server that is not connected."""
    return UpstreamUnavailable(status.name, status.error or status.status, retrying=status.status != "disabled")


def _upstream_tools(pack: str, server: str, tools: Iterable[types.Tool]) -> dict[str, Tool]:
    out: dict[str, Tool] = {}
    for t in tools:
        name = to_identifier(t.name)
        if name in out:
            logger.warning(
                "server '{}': tools '{}' and '{}' both become '{}'; the second is reachable only via proxy.call",
                server,
                out[name].remote_name,
                t.name,
                name,
            )
            continue
        schema = ToolSchema(t.input_schema)
        out[name] = Tool(
            pack=pack,
            name=name,
            description=(t.description or t.title or "").strip(),
            signature=schema.signature(f"{pack}.{name}"),
            source="upstream",
            server=server,
            remote_name=t.name,
            schema=schema,
            output_schema=t.output_schema,
            annotations=t.annotations.model_dump(exclude_none=True) if t.annotations else None,
        )
    return out


# ---- invoking a tool -------------------------------------------------------------------------


async def invoke(tool: Tool, args: list[Any], kwargs: dict[str, Any], ctx: PackContext) -> Any:
    """Call one tool with snippet arguments; return plain JSON-able data or raise :class:`PackError`."""
    if tool.source == "local":
        return await _invoke_local(tool, args, kwargs, ctx)
    assert tool.schema is not None and tool.server is not None and tool.remote_name is not None
    arguments = tool.schema.bind(tool.signature, args, kwargs)
    return await call_upstream(
        ctx.pool, tool.server, tool.remote_name, arguments, f"{tool.pack}.{tool.name}", tool.output_schema
    )


async def call_upstream(
    pool: UpstreamPool,
    server: str,
    remote_name: str,
    arguments: dict[str, Any],
    display: str,
    output_schema: Mapping[str, Any] | None = None,
) -> Any:
    result = await pool.call(server, remote_name, arguments)
    if result.is_error:
        raise ToolFailed(f"{display} failed: {error_text(result)}")
    return to_value(result, output_schema)


async def _invoke_local(tool: Tool, args: list[Any], kwargs: dict[str, Any], ctx: PackContext) -> Any:
    assert tool.func is not None and tool.python_signature is not None
    try:
        bound = tool.python_signature.bind(*args, **kwargs, **({"ctx": ctx} if tool.wants_ctx else {}))
    except TypeError as e:
        raise ArgumentError(f"{tool.signature}: {e}") from None
    if tool.arguments is not None:
        # Arguments come from model-written code: check (and coerce) them against the annotations.
        try:
            checked = tool.arguments.model_validate({k: v for k, v in bound.arguments.items() if k != "ctx"})
        except ValidationError as e:
            first = e.errors(include_url=False)[0]
            where = ".".join(str(p) for p in first["loc"])
            raise ArgumentError(f"{tool.signature}: argument {where!r}: {first['msg']}") from None
        bound.arguments.update({name: getattr(checked, name) for name in tool.arguments.model_fields})
    if inspect.iscoroutinefunction(tool.func):
        value = await tool.func(*bound.args, **bound.kwargs)
    else:
        # A sync pack function may block; keep the event loop (and every other run) responsive.
        value = await anyio.to_thread.run_sync(partial(tool.func, *bound.args, **bound.kwargs), abandon_on_cancel=True)
    return to_jsonable_python(value, fallback=repr)


# ---- loading local packs ---------------------------------------------------------------------


def load_local_packs(dirs: Iterable[Path] = ()) -> dict[str, LocalPack]:
    """The shipped packs plus every ``*.py`` module in ``dirs``; a later folder overrides an earlier one."""
    found: dict[str, LocalPack] = {}
    builtin = importlib.import_module(BUILTIN_PACKS)
    for info in pkgutil.iter_modules(builtin.__path__):
        if not info.name.startswith("_"):
            module = importlib.import_module(f"{BUILTIN_PACKS}.{info.name}")
            found[to_identifier(info.name)] = _local_pack(module)
    for folder in dirs:
        if not folder.is_dir():
            raise ConfigError(f"packs.dirs: {folder} is not a folder")
        for path in sorted(folder.glob("*.py")):
            if not path.name.startswith("_"):
                found[to_identifier(path.stem)] = _local_pack(_import_file(path))
    return found


def _import_file(path: Path) -> ModuleType:
    name = f"onetool_pack_{to_identifier(path.stem)}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ConfigError(f"{path}: cannot load as a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as e:
        del sys.modules[name]
        raise ConfigError(f"{path}: local pack failed to import: {type(e).__name__}: {e}") from None
    return module


def _local_pack(module: ModuleType) -> LocalPack:
    pack = to_identifier(module.__name__.rsplit(".", 1)[-1].removeprefix("onetool_pack_"))
    names = getattr(module, "__all__", None) or [n for n in vars(module) if not n.startswith("_")]
    tools: dict[str, Tool] = {}
    for name in names:
        fn = getattr(module, name, None)
        if not inspect.isfunction(fn) or fn.__module__ != module.__name__:
            continue
        sig = inspect.signature(fn)
        wants_ctx = "ctx" in sig.parameters
        tools[name] = Tool(
            pack=pack,
            name=name,
            description=inspect.getdoc(fn) or "",
            signature=f"{pack}.{name}({_format_params(sig)})",
            source="local",
            func=fn,
            python_signature=sig,
            wants_ctx=wants_ctx,
            arguments=_argument_model(fn, sig),
        )
    return LocalPack(name=pack, path=str(getattr(module, "__file__", "")), tools=tools)


def _argument_model(fn: Callable[..., Any], sig: inspect.Signature) -> type[BaseModel] | None:
    """A model of the parameters a snippet passes (not ``ctx``), for type checks; None if it cannot be built."""
    params = [p for p in sig.parameters.values() if p.name != "ctx"]
    if any(p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD, p.POSITIONAL_ONLY) for p in params):
        return None
    try:
        # Resolve string annotations in the pack's own namespace, leaving out ctx's (often a TYPE_CHECKING import).
        shim = SimpleNamespace(__annotations__={p.name: p.annotation for p in params if p.annotation is not p.empty})
        hints = typing.get_type_hints(shim, globalns=getattr(fn, "__globals__", {}))
        fields: dict[str, Any] = {
            p.name: (hints.get(p.name, Any), ... if p.default is p.empty else p.default) for p in params
        }
        return create_model(f"{fn.__name__}_arguments", __config__=ConfigDict(arbitrary_types_allowed=True), **fields)
    except Exception as e:  # an annotation pydantic cannot check: the function still runs, unchecked
        logger.warning("local tool {}: argument types will not be checked: {}", fn.__qualname__, e)
        return None


def _format_params(sig: inspect.Signature) -> str:
    parts = []
    for p in sig.parameters.values():
        if p.name == "ctx":
            continue
        text = p.name
        if p.kind is p.VAR_POSITIONAL:
            text = "*" + text
        elif p.kind is p.VAR_KEYWORD:
            text = "**" + text
        if p.annotation is not p.empty:
            ann = p.annotation if isinstance(p.annotation, str) else inspect.formatannotation(p.annotation)
            text += f": {ann}"
        if p.default is not p.empty:
            text += f" = {p.default!r}"
        parts.append(text)
    return ", ".join(parts)
