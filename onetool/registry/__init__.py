"""Packs and tools: what a snippet can call, by the names snippets use; :mod:`onetool.calls` makes the calls."""

from onetool.registry.local import load_local_packs
from onetool.registry.registry import Pack, Registry
from onetool.registry.schema import ToolSchema
from onetool.registry.tools import LocalTool, Tool, UpstreamTool

__all__ = ["LocalTool", "Pack", "Registry", "Tool", "ToolSchema", "UpstreamTool", "load_local_packs"]
