"""OneTool: an MCP gateway with one tool, run(code).

As a library: ``async with Gateway(load_config(path)) as gw: await gw.run(code)``; a local pack's function gets a
``PackContext``; every error OneTool raises on purpose is in :mod:`onetool.errors`. Names load on first use, so
importing ``onetool`` (every layer does, for ``__version__``) costs nothing and imports no layer above.
"""

from __future__ import annotations

from onetool.lazy import lazy_exports

__version__ = "0.1.0"

__all__ = ["Calls", "Config", "Gateway", "ModelError", "OneToolError", "PackContext", "__version__", "load_config"]

__getattr__ = lazy_exports(
    __name__,
    {
        "Calls": "core.calls",
        "Config": "config",
        "Gateway": "core.gateway",
        "ModelError": "errors",
        "OneToolError": "errors",
        "PackContext": "core.calls",
        "load_config": "config",
    },
)
