"""Packs and tools: what a snippet can call, and where each call goes (``registry.resolve(pack, tool).call(...)``)."""

from onetool.registry.local import load_local_packs
from onetool.registry.registry import Pack, Registry
from onetool.registry.schema import ToolSchema
from onetool.registry.tools import LocalTool, PackContext, Tool, UpstreamTool

__all__ = ["LocalTool", "Pack", "PackContext", "Registry", "Tool", "ToolSchema", "UpstreamTool", "load_local_packs"]
