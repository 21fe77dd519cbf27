"""Language layer, run time: the guards and the builtins a restricted snippet executes with.

Nothing here is the security boundary (that is the worker's OS confinement); it keeps the obvious
object-graph walks closed and explains what to do instead.
"""

from __future__ import annotations

import base64
import builtins
import collections
import datetime
import hashlib
import importlib
import itertools
import json
import math
import operator
import random
import re
import statistics
import string
import textwrap
import unicodedata
from collections.abc import Callable, Iterable, Mapping
from types import CodeType, FrameType, ModuleType, TracebackType
from typing import Any

from RestrictedPython.Guards import guarded_iter_unpack_sequence, guarded_unpack_sequence, safe_builtins
from RestrictedPython.transformer import INSPECT_ATTRIBUTES

from sandbox.errors import SNIPPET_ERRORS, PolicyError
from sandbox.policy import (
    ALLOWED_DUNDER_METHODS,
    ALLOWED_MODULES,
    import_message,
    internals_message,
    private_name_message,
)

# Non-underscore names that still open frames, code or generator internals.
BLOCKED_ATTRIBUTES = INSPECT_ATTRIBUTES | {
    "tb_lasti",
    "tb_lineno",
    "f_lasti",
    "f_lineno",
    "f_trace_lines",
    "f_trace_opcodes",
    "gi_running",
    "gi_suspended",
    "cr_running",
    "cr_suspended",
    "ag_running",
}
_OPAQUE_TYPES = (FrameType, TracebackType, CodeType, ModuleType)


def check_attribute(obj: Any, name: Any) -> str:
    if type(name) is not str:
        raise TypeError("attribute name must be a string")
    normal = unicodedata.normalize("NFKC", name)
    if normal.startswith("_") and not (isinstance(obj, super) and normal in ALLOWED_DUNDER_METHODS):
        raise PolicyError(private_name_message(name))
    if normal in BLOCKED_ATTRIBUTES or isinstance(obj, _OPAQUE_TYPES):
        raise PolicyError(internals_message(name))
    return name


class _SafeFormatter(string.Formatter):
    """str.format whose '{0.attr}' / '{0[key]}' fields go through the same guards as code does."""

    def get_field(self, field_name: str, args: Any, kwargs: Any) -> tuple[Any, Any]:
        first, rest = _field_name_split(field_name)
        obj = self.get_value(first, args, kwargs)
        for is_attribute, key in rest:
            obj = guarded_getattr(obj, key) if is_attribute else obj[key]
        return obj, first


_FieldSplit = Callable[[str], tuple[Any, Iterable[tuple[bool, Any]]]]
_field_name_split: _FieldSplit = __import__("_string").formatter_field_name_split
_FORMATTER = _SafeFormatter()


def _format_method(template: str) -> Callable[..., str]:
    def format(*args: Any, **kwargs: Any) -> str:
        return _FORMATTER.vformat(template, args, kwargs)

    return format


def _format_map_method(template: str) -> Callable[[Mapping[str, Any]], str]:
    def format_map(mapping: Mapping[str, Any]) -> str:
        return _FORMATTER.vformat(template, (), mapping)

    return format_map


def _unbound_format(template: str, *args: Any, **kwargs: Any) -> str:
    return _FORMATTER.vformat(template, args, kwargs)


def _unbound_format_map(template: str, mapping: Mapping[str, Any]) -> str:
    return _FORMATTER.vformat(template, (), mapping)


_MISSING = object()


def guarded_getattr(obj: Any, name: Any, default: Any = _MISSING) -> Any:
    check_attribute(obj, name)
    if name in ("format", "format_map"):
        if isinstance(obj, str):
            return _format_method(obj) if name == "format" else _format_map_method(obj)
        if isinstance(obj, type) and issubclass(obj, str):
            return _unbound_format if name == "format" else _unbound_format_map
    if default is _MISSING:
        return getattr(obj, name)
    return getattr(obj, name, default)


def guarded_hasattr(obj: Any, name: Any) -> bool:
    try:
        guarded_getattr(obj, name)
    except (AttributeError, PolicyError):
        return False
    return True


class SnippetClass(type):
    """Metaclass of every class a snippet defines, so writes to its own objects can be told apart."""


_WRITABLE = (dict, list, bytearray, set, collections.deque)


def guarded_write(obj: Any) -> Any:
    if isinstance(obj, (*_WRITABLE, SnippetClass)) or isinstance(type(obj), SnippetClass):
        return obj
    raise PolicyError(
        f"cannot change a {type(obj).__name__} object: only dicts, lists, sets and objects of classes "
        "defined in the snippet can be modified"
    )


def guarded_setattr(obj: Any, name: Any, value: Any) -> None:
    setattr(guarded_write(obj), check_attribute(obj, name), value)


def guarded_delattr(obj: Any, name: Any) -> None:
    delattr(guarded_write(obj), check_attribute(obj, name))


def guarded_dir(*obj: Any) -> list[str]:
    if not obj:
        raise PolicyError(internals_message("dir()"))
    return [name for name in dir(*obj) if not name.startswith("_")]


_INPLACE: dict[str, Callable[[Any, Any], Any]] = {
    "+=": operator.iadd,
    "-=": operator.isub,
    "*=": operator.imul,
    "/=": operator.itruediv,
    "//=": operator.ifloordiv,
    "%=": operator.imod,
    "**=": operator.ipow,
    "<<=": operator.ilshift,
    ">>=": operator.irshift,
    "&=": operator.iand,
    "|=": operator.ior,
    "^=": operator.ixor,
    "@=": operator.imatmul,
}


def inplace(op: str, left: Any, right: Any) -> Any:
    return _INPLACE[op](left, right)


def augmented_item(obj: Any, key: Any, op: str, value: Any) -> None:
    guarded_write(obj)[key] = inplace(op, obj[key], value)


def augmented_attribute(obj: Any, name: str, op: str, value: Any) -> None:
    guarded_setattr(obj, name, inplace(op, guarded_getattr(obj, name), value))


def apply(func: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    return func(*args, **kwargs)


class ModuleNamespace:
    """The public functions, classes and constants of an allowed module, never the module itself."""

    def __init__(self, name: str, attributes: Mapping[str, Any]) -> None:
        self.__dict__.update(attributes)
        object.__setattr__(self, "_name", name)

    def __repr__(self) -> str:
        return f"<module '{self._name}' (sandboxed)>"

    def __setattr__(self, name: str, value: Any) -> None:
        raise PolicyError(f"module '{self._name}' is read-only")


def _namespace(module: ModuleType) -> ModuleNamespace:
    public = {
        name: value
        for name, value in vars(module).items()
        if not name.startswith("_") and not isinstance(value, ModuleType)
    }
    return ModuleNamespace(module.__name__, public)


NAMESPACES: dict[str, ModuleNamespace] = {
    module.__name__: _namespace(module)
    for module in (
        base64,
        collections,
        datetime,
        hashlib,
        itertools,
        json,
        math,
        random,
        re,
        statistics,
        textwrap,
    )
}
assert tuple(sorted(NAMESPACES)) == ALLOWED_MODULES

# Modules the allowed ones import lazily inside functions; after confinement no file can be opened, so
# they are loaded now (Counter.most_common -> heapq, datetime.strptime -> _strptime, copy for deepcopy).
for _lazy in ("heapq", "_strptime", "copy", "bisect", "fractions", "decimal", "encodings.idna"):
    importlib.import_module(_lazy)


def guarded_import(
    name: str, globals: Any = None, locals: Any = None, fromlist: Any = (), level: int = 0
) -> ModuleNamespace:
    if level != 0 or name not in NAMESPACES:
        raise PolicyError(import_message(name))
    return NAMESPACES[name]


_EXTRA_BUILTINS = [
    "all",
    "any",
    "ascii",
    "bin",
    "bytes",
    "dict",
    "enumerate",
    "filter",
    "format",
    "frozenset",
    "iter",
    "list",
    "map",
    "max",
    "min",
    "next",
    "object",
    "property",
    "reversed",
    "set",
    "sorted",
    "staticmethod",
    "classmethod",
    "sum",
    "super",
    "tuple",
    "type",
    "zip",
    "NotImplemented",
    "StopAsyncIteration",
    "RecursionError",
    "TimeoutError",
    "ConnectionError",
    "PermissionError",
    "FileNotFoundError",
]


def _builtins() -> dict[str, Any]:
    names = {name: value for name, value in safe_builtins.items() if name != "_getattr_"}
    names.update({name: getattr(builtins, name) for name in _EXTRA_BUILTINS})
    names.update(
        {
            "__import__": guarded_import,
            "getattr": guarded_getattr,
            "hasattr": guarded_hasattr,
            "setattr": guarded_setattr,
            "delattr": guarded_delattr,
            "dir": guarded_dir,
            **SNIPPET_ERRORS,
        }
    )
    return names


_BUILTINS = _builtins()
"""Built once at import (in the zygote, before any fork); each run gets its own copy."""


def make_builtins() -> dict[str, Any]:
    return dict(_BUILTINS)


def make_globals(print_factory: Callable[..., Any], extra: Mapping[str, Any]) -> dict[str, Any]:
    """Globals for one restricted run: the guard names RestrictedPython's rewrite calls, plus `extra`."""
    return {
        "__builtins__": make_builtins(),
        "__name__": "snippet",
        "__metaclass__": SnippetClass,
        "_getattr_": guarded_getattr,
        "_getitem_": operator.getitem,
        "_getiter_": iter,
        "_write_": guarded_write,
        "_inplacevar_": inplace,
        "_augitem_": augmented_item,
        "_augattr_": augmented_attribute,
        "_apply_": apply,
        "_iter_unpack_sequence_": guarded_iter_unpack_sequence,
        "_unpack_sequence_": guarded_unpack_sequence,
        "_print_": print_factory,
        **extra,
    }
