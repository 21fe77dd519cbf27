"""Loading local packs: Python modules whose public functions become tools.

The shipped packs live in the top-level ``packs`` package; more come from the folders in ``packs.dirs``.
A later folder overrides an earlier one. A module that fails to import, or a tool whose ``ctx`` is not
keyword-only, is a config error: found at startup, before any process starts.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import pkgutil
import sys
import typing
from collections.abc import Callable, Iterable
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

from pydantic import BaseModel, ConfigDict, create_model

from onetool.config import to_identifier
from onetool.errors import ConfigError
from onetool.logs import logger
from onetool.registry._tools import CTX, LocalTool, Pack

BUILTIN_PACKS = "packs"


def load_local_packs(dirs: Iterable[Path] = ()) -> dict[str, Pack]:
    """The shipped packs plus every ``*.py`` module in ``dirs``."""
    found: dict[str, Pack] = {}
    builtin = importlib.import_module(BUILTIN_PACKS)
    for info in pkgutil.iter_modules(builtin.__path__):
        if not info.name.startswith("_"):
            found[to_identifier(info.name)] = _local_pack(importlib.import_module(f"{BUILTIN_PACKS}.{info.name}"))
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


def _local_pack(module: ModuleType) -> Pack:
    pack = to_identifier(module.__name__.rsplit(".", 1)[-1].removeprefix("onetool_pack_"))
    names = getattr(module, "__all__", None) or [n for n in vars(module) if not n.startswith("_")]
    tools: dict[str, LocalTool] = {}
    for name in names:
        fn = getattr(module, name, None)
        if inspect.isfunction(fn) and fn.__module__ == module.__name__:
            tools[name] = _local_tool(pack, name, fn)
    return Pack(name=pack, tools=dict(tools))


def _local_tool(pack: str, name: str, fn: Callable[..., Any]) -> LocalTool:
    sig = inspect.signature(fn)
    ctx = sig.parameters.get(CTX)
    if ctx is not None and ctx.kind is not ctx.KEYWORD_ONLY:
        raise ConfigError(f"local tool {pack}.{name}: declare '{CTX}' keyword-only (`def {name}(..., *, ctx)`)")
    parameters = sig.replace(parameters=[p for p in sig.parameters.values() if p.name != CTX])
    return LocalTool(
        pack=pack,
        name=name,
        description=inspect.getdoc(fn) or "",
        signature=f"{pack}.{name}({_format_params(parameters)})",
        func=fn,
        parameters=parameters,
        wants_ctx=ctx is not None,
        arguments=_argument_model(fn, parameters),
    )


def _argument_model(fn: Callable[..., Any], parameters: inspect.Signature) -> type[BaseModel] | None:
    """A model of the parameters a snippet passes, for type checks; None if it cannot be built."""
    params = list(parameters.parameters.values())
    if any(p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD, p.POSITIONAL_ONLY) for p in params):
        return None
    try:
        # Resolve string annotations in the pack's own namespace (ctx's, often a TYPE_CHECKING import, is left out).
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
