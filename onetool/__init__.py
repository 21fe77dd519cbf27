"""OneTool: an MCP gateway with one tool, run(code).

As a library: ``async with Gateway(load_config(path)) as gw: await gw.run(code)``; a local pack's function gets a
``PackContext``; every error OneTool raises on purpose is in :mod:`onetool.errors`. Names load on first use, so
importing ``onetool`` (the CLI does, for ``__version__``) costs nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from onetool.lazy import lazy_exports

if TYPE_CHECKING:
    from onetool.calls import Calls, PackContext
    from onetool.config import Config, load_config
    from onetool.errors import ModelError, OneToolError
    from onetool.gateway import Gateway

__version__ = "0.1.0"

__all__ = ["Calls", "Config", "Gateway", "ModelError", "OneToolError", "PackContext", "__version__", "load_config"]

__getattr__ = lazy_exports(
    __name__,
    {
        "Calls": "calls",
        "Config": "config",
        "Gateway": "gateway",
        "ModelError": "errors",
        "OneToolError": "errors",
        "PackContext": "calls",
        "load_config": "config",
    },
)
