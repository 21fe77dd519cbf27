"""Language layer, run time: the guards and the builtins a restricted snippet executes with.

Nothing here is the security boundary (that is the worker's OS confinement); it keeps the object graph
closed and says what to do instead. What holds it together:

- every attribute read goes through `guarded_getattr`, the ones a format string's `{0.attr}` fields make
  included, and its *result* is vetted whatever route led to it: the real `str.format`/`format_map` (from
  a str, a str subclass, `super()`, the class) is swapped for one whose fields come back here, and what a
  built-in exception carries (`obj`, `name`, `args`, `value`, ...) reaches the snippet only as data or the
  snippet's own objects;
- the guards are bound into the compiled code as constants (sandbox.worker.policy.compile_restricted), never looked
  up by name, so a snippet holding its own globals dict could not rebind them;
- `type()` hands out only types the snippet can name anyway, and so does `x.__class__`; `__name__` and
  `__doc__` read as text only, and no other dunder reads at all; a snippet class's `__exit__` never sees a
  traceback.
"""

from __future__ import annotations

import builtins
import collections
import operator
import unicodedata
from collections.abc import Callable, Mapping
from types import BuiltinMethodType, CodeType, FrameType, FunctionType, MethodType, ModuleType, TracebackType
from typing import Any

from RestrictedPython.Guards import guarded_iter_unpack_sequence, guarded_unpack_sequence, safe_builtins
from RestrictedPython.transformer import INSPECT_ATTRIBUTES

from sandbox.protocol.errors import SNIPPET_ERRORS, PolicyError
from sandbox.worker._formatting import SafeFormats
from sandbox.worker._modules import NAMESPACES, guarded_import
from sandbox.worker._record import Record
from sandbox.worker.policy import (
    ALLOWED_DUNDER_METHODS,
    FILENAME,
    READABLE_DUNDERS,
    internals_message,
    private_name_message,
)

__all__ = [
    "BLOCKED_ATTRIBUTES",
    "SnippetClass",
    "SnippetType",
    "apply",
    "augmented_attribute",
    "augmented_item",
    "check_attribute",
    "guarded_delattr",
    "guarded_dir",
    "guarded_getattr",
    "guarded_hasattr",
    "guarded_setattr",
    "guarded_write",
    "inplace",
    "make_builtins",
    "make_globals",
    "make_guards",
    "snippet_class",
    "snippet_made",
    "type_of",
]

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


# Late-bound: guarded_getattr is defined below, and the formatter's fields must go through it.
_FORMATS = SafeFormats(lambda obj, name: guarded_getattr(obj, name))


def snippet_made(value: Any) -> bool:
    """A class, instance, function or method the snippet's own code defined."""
    kind = type(value)
    if isinstance(value, SnippetClass) or isinstance(kind, SnippetClass):
        return True
    if kind is FunctionType:
        filename: str = value.__code__.co_filename
        return filename == FILENAME
    return kind is MethodType and snippet_made(value.__func__) and snippet_made(value.__self__)


_SCALARS = (bool, int, float, complex, str, bytes, bytearray, BaseException)
_CARRIED_DEPTH = 8


def _plain(value: Any, depth: int = 0) -> bool:
    """Data, exceptions, objects of the allowed modules' classes, or the snippet's own objects."""
    if value is None or isinstance(value, _SCALARS) or snippet_made(value):
        return True
    kind = type(value)
    if kind in _EXPORTED_CLASSES:
        return True
    if depth >= _CARRIED_DEPTH:
        return False
    if kind in (tuple, list, set, frozenset):
        return all(_plain(item, depth + 1) for item in value)
    if kind is dict or kind is Record:
        return all(_plain(key, depth + 1) and _plain(item, depth + 1) for key, item in value.items())
    return False


def _hidden(value: Any) -> str:
    """Stands in for an object an exception carried that the snippet must not get hold of."""
    return f"<{type(value).__name__} object>"


def _carried(exc: BaseException, value: Any) -> Any:
    """An attribute of a built-in exception as the snippet may see it: `AttributeError.obj`, `NameError.name`,
    `ImportError.path`, `StopIteration.value`, `args` can hold whatever the raiser had at hand."""
    if type(value) in (BuiltinMethodType, MethodType) and value.__self__ is exc:
        return value  # its own methods: with_traceback, add_note, split, derive
    if type(value) is tuple:
        return tuple(item if _plain(item) else _hidden(item) for item in value)
    return value if _plain(value) else _hidden(value)


_MISSING = object()


def guarded_getattr(obj: Any, name: Any, default: Any = _MISSING) -> Any:
    readable = _readable_dunder(name)
    if readable is not None:
        return _read_dunder(obj, readable, default)
    check_attribute(obj, name)
    try:
        value = getattr(obj, name)
    except AttributeError:
        if default is _MISSING:
            raise
        return default
    if isinstance(obj, BaseException):
        return _carried(obj, value)
    return _FORMATS.defuse(value)


def _readable_dunder(name: Any) -> str | None:
    """The READABLE_DUNDERS name ``name`` spells (as the parser would read it), else None."""
    if type(name) is not str:
        return None
    normal = unicodedata.normalize("NFKC", name)
    return normal if normal in READABLE_DUNDERS else None


def _read_dunder(obj: Any, name: str, default: Any) -> Any:
    """``obj.__class__`` as type() gives it; ``obj.__name__`` and ``obj.__doc__`` when they are text (or None).
    Looked up as the interpreter does, but never through a ``__getattr__`` (a Record's would read a key)."""
    if isinstance(obj, _OPAQUE_TYPES):
        raise PolicyError(internals_message(name))
    if name == "__class__":
        return type_of(obj)
    try:
        # The type's own lookup: a method's delegates to its function; ``__getattr__`` is never consulted.
        getattribute: Any = type(obj).__getattribute__
        value = getattribute(obj, name)
    except AttributeError:
        if default is _MISSING:
            raise
        return default
    if value is None or type(value) is str:
        return value
    raise PolicyError(f"'{name}' of a {type(obj).__name__!r} object is not text, so it cannot be read here")


def guarded_hasattr(obj: Any, name: Any) -> bool:
    try:
        guarded_getattr(obj, name)
    except (AttributeError, PolicyError):
        return False
    return True


class SnippetClass(type):
    """Metaclass of every class a snippet defines, so writes to its own objects can be told apart."""

    def __new__(mcls, name: str, bases: tuple[type, ...], namespace: dict[str, Any], **kwargs: Any) -> SnippetClass:
        if "__exit__" in namespace:
            namespace["__exit__"] = _without_traceback(namespace["__exit__"])
        return super().__new__(mcls, name, bases, namespace, **kwargs)


def _without_traceback(exit_method: Any) -> Callable[..., Any]:
    """A `with` block hands `__exit__` the live traceback, whose frames lead everywhere: pass None instead."""

    def __exit__(self: Any, kind: Any, value: Any, traceback: Any) -> Any:
        bind = getattr(type(exit_method), "__get__", None)
        method = exit_method if bind is None else bind(exit_method, self, type(self))
        return method(kind, value, None)

    return __exit__


_SNIPPET_METACLASSES: dict[type, type] = {}


def snippet_class(name: str, bases: tuple[type, ...], namespace: dict[str, Any], **kwargs: Any) -> type:
    """What `class X(...)` calls (RestrictedPython's `__metaclass__`): SnippetClass, or with a base such as
    `collections.UserDict` whose metaclass is ABCMeta, a SnippetClass subclass of that metaclass."""
    meta: type = SnippetClass
    for base in bases:
        kind = type(base)
        if issubclass(meta, kind):
            continue
        if not issubclass(kind, meta):
            meta = _SNIPPET_METACLASSES.get(kind) or _SNIPPET_METACLASSES.setdefault(
                kind, type(f"Snippet{kind.__name__}", (SnippetClass, kind), {})
            )
    made: type = meta(name, bases, namespace, **kwargs)
    return made


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


class _TypeMeta(type):
    """Lets the snippet's `type` stand where the real one does: isinstance(x, type), repr."""

    def __instancecheck__(cls, obj: Any) -> bool:
        return isinstance(obj, type)

    def __subclasscheck__(cls, subclass: Any) -> bool:
        return isinstance(subclass, type) and issubclass(subclass, type)

    def __call__(cls, *args: Any) -> type:
        return type_of(*args)

    def __repr__(cls) -> str:
        return "<class 'type'>"


class SnippetType(metaclass=_TypeMeta):
    """The snippet's `type`: `type(x)` as usual, but only for types it could name anyway."""


def type_of(*args: Any) -> type:
    if len(args) != 1:
        raise PolicyError("type() takes one argument here: define classes with a class statement")
    kind = type(args[0])
    if kind in _NAMEABLE or isinstance(kind, SnippetClass) or issubclass(kind, BaseException):
        return kind
    raise PolicyError(
        f"type() of a {kind.__name__!r} object is not available: compare with isinstance(x, T) "
        "using a type you can name (a builtin, a class of an allowed module, or your own class)"
    )


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
            "type": SnippetType,
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
"""Built once at import (in the zygote, before any fork); each run gets its own, in its own process."""

_EXPORTED_CLASSES = frozenset(
    value for namespace in NAMESPACES.values() for value in vars(namespace).values() if isinstance(value, type)
)
_NAMEABLE = _EXPORTED_CLASSES | {
    *(value for value in _BUILTINS.values() if isinstance(value, type)),
    type(None),
    type(...),
    type(NotImplemented),
}
"""The types a snippet can reach by name; type() of anything else would be a way in (function, generator)."""


def make_builtins() -> dict[str, Any]:
    return dict(_BUILTINS)


def make_guards(print_factory: Callable[..., Any]) -> dict[str, Any]:
    """The functions RestrictedPython's rewrite calls, for compile_restricted to bind into the code."""
    return {
        "__metaclass__": snippet_class,
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
    }


def make_globals(extra: Mapping[str, Any], *, own_builtins: bool = True) -> dict[str, Any]:
    """Globals for one restricted run: builtins and `extra`; no guard lives here, so none can be rebound.

    A worker, a process of its own for one run, passes `own_builtins=False` and runs with the builtins dict
    itself: its copy would write a reference count into each of the 150-odd objects it holds, and so copy
    their pages from the fork-server (about 35 page faults per worker). Only our own constant prefault job
    runs before the snippet in that process, and it changes nothing there but `parallel` and `progress`,
    which every run sets anew."""
    return {"__builtins__": make_builtins() if own_builtins else _BUILTINS, "__name__": "snippet", **extra}
