"""What a language-layer run may hand back: data and the snippet's own objects, nothing that leads elsewhere.

A canary check only catches an escape that already read a secret; this one fails on the footholds
themselves: a class the snippet could not name (`object.__subclasses__()`, `type(lambda: 0)`), a module or
module-like namespace, a function or method that is not the snippet's, a frame, code object, traceback,
generator, cell or mapping proxy, or a dict that is a real namespace.
"""

from __future__ import annotations

import importlib
from collections import deque
from types import (
    AsyncGeneratorType,
    BuiltinFunctionType,
    CellType,
    ClassMethodDescriptorType,
    CodeType,
    CoroutineType,
    FrameType,
    FunctionType,
    GeneratorType,
    GetSetDescriptorType,
    MappingProxyType,
    MemberDescriptorType,
    MethodDescriptorType,
    MethodType,
    MethodWrapperType,
    ModuleType,
    TracebackType,
    WrapperDescriptorType,
)
from typing import Any

from sandbox.worker._exports import EXPORTS
from sandbox.worker._guards import guarded_getattr, make_builtins, snippet_made
from sandbox.worker._jsonable import safe_repr
from sandbox.worker._modules import ModuleNamespace

_FOOTHOLDS = (
    ModuleType,
    ModuleNamespace,
    FrameType,
    CodeType,
    TracebackType,
    GeneratorType,
    CoroutineType,
    AsyncGeneratorType,
    CellType,
    MappingProxyType,
)
_CALLABLES = (
    FunctionType,
    BuiltinFunctionType,
    MethodType,
    MethodWrapperType,
    WrapperDescriptorType,
    MethodDescriptorType,
    ClassMethodDescriptorType,
    GetSetDescriptorType,
    MemberDescriptorType,
)
_SEQUENCES = (list, tuple, set, frozenset, deque)
_EXCEPTION_PAYLOADS = ("args", "obj", "name", "path", "value", "exceptions")


def _nameable_classes() -> set[int]:
    values = [*make_builtins().values()]
    for module, names in EXPORTS.items():
        values += [getattr(importlib.import_module(module), name) for name in names]
    return {id(value) for value in values if isinstance(value, type)} | {id(type(None))}


_NAMEABLE = _nameable_classes()


def footholds(value: Any, namespace: dict[str, Any] | None = None) -> list[str]:
    """Every foothold reachable from `value` the way snippet code could reach it; empty when inert."""
    found: list[str] = []
    seen: set[int] = set()
    real_namespaces = {id(namespace), id(namespace.get("__builtins__"))} if namespace is not None else set()

    def walk(item: Any, path: str) -> None:
        if id(item) in seen:
            return
        seen.add(id(item))
        kind = type(item)
        if isinstance(item, _FOOTHOLDS):
            found.append(f"{path}: {kind.__name__}")
        elif isinstance(item, type):
            if not snippet_made(item) and id(item) not in _NAMEABLE:
                found.append(f"{path}: class {item.__name__}")
        elif isinstance(item, _CALLABLES):
            if not snippet_made(item):
                found.append(f"{path}: {kind.__name__} {getattr(item, '__qualname__', '?')}")
        elif isinstance(item, dict):
            if id(item) in real_namespaces or "__builtins__" in item:
                found.append(f"{path}: a namespace dict")
            for key, entry in dict.items(item):
                walk(key, f"{path} key")
                walk(entry, f"{path}[{safe_repr(key)}]")
        elif isinstance(item, _SEQUENCES):
            # The base type's own iterator: a subclass's __iter__ is the snippet's and may lie.
            base = next(base for base in _SEQUENCES if isinstance(item, base))
            for index, entry in enumerate(base.__iter__(item)):
                walk(entry, f"{path}[{index}]")
        elif isinstance(item, BaseException):
            for name in _EXCEPTION_PAYLOADS:
                walk(guarded_getattr(item, name, None), f"{path}.{name}")
        if snippet_made(item) and not isinstance(item, _CALLABLES):
            # What the snippet stored on its own objects and classes; dunders are the interpreter's.
            for name, entry in getattr(item, "__dict__", {}).items():
                if not name.startswith("__"):
                    walk(entry, f"{path}.{name}")

    walk(value, "value")
    return found
