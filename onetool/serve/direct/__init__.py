"""The direct face, ``/mcp/direct``: every visible upstream tool as ``server:tool``, beside management tools."""

from onetool.serve._names import MAX_NAME
from onetool.serve.direct._face import (
    DirectCatalogue,
    DirectFace,
    Separator,
    build_direct_server,
    direct_names,
)

__all__ = ["MAX_NAME", "DirectCatalogue", "DirectFace", "Separator", "build_direct_server", "direct_names"]
