"""The allowed modules as a snippet sees them: namespaces of their allowed names, never the modules.

A real module object leads elsewhere (`json.codecs` -> `os`); a ModuleNamespace holds only the names
sandbox.worker._exports lists for it, and is read-only.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Mapping
from types import ModuleType
from typing import Any

from sandbox.protocol.errors import PolicyError
from sandbox.worker._exports import EXPORTS
from sandbox.worker.policy import import_message, missing_name_message

__all__ = ["NAMESPACES", "ModuleNamespace", "guarded_import"]


class ModuleNamespace:
    """The allowed names of an allowed module, never the module itself (`json.codecs` leads to `os`)."""

    def __init__(self, name: str, attributes: Mapping[str, Any]) -> None:
        self.__dict__.update(attributes)
        object.__setattr__(self, "_name", name)

    def __repr__(self) -> str:
        return f"<module '{self._name}' (sandboxed)>"

    def __setattr__(self, name: str, value: Any) -> None:
        raise PolicyError(f"module '{self._name}' is read-only")

    def __getattr__(self, name: str) -> Any:
        raise AttributeError(missing_name_message(self._name, name))


def _namespace(name: str) -> ModuleNamespace:
    module = importlib.import_module(name)
    attributes = {attribute: getattr(module, attribute) for attribute in EXPORTS[name]}
    assert not any(isinstance(value, ModuleType) for value in attributes.values()), name
    return ModuleNamespace(name, attributes)


NAMESPACES: dict[str, ModuleNamespace] = {name: _namespace(name) for name in EXPORTS}

# Modules the allowed ones import lazily inside functions; after confinement no file can be opened, so
# they are loaded now (Counter.most_common -> heapq, datetime.strptime -> _strptime, copy for deepcopy).
for _lazy in ("heapq", "_strptime", "copy", "bisect", "fractions", "decimal", "encodings.idna"):
    importlib.import_module(_lazy)


def guarded_import(name: str, globals: Any = None, locals: Any = None, fromlist: Any = (), level: int = 0) -> Any:
    if level == 0 and name in NAMESPACES:
        return NAMESPACES[name]
    if type(fromlist) is list and name in sys.modules:
        # C's PyImport_Import (datetime.strptime loading _strptime) calls the running frame's __import__ with
        # a list, then reads sys.modules itself: nothing returned here reaches the snippet, which cannot make
        # this call (its import statements pass None or a tuple, and it cannot name __import__).
        return None
    raise PolicyError(import_message(name))
