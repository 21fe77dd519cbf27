"""Packs and tools: what a snippet can call, by the names snippets use; :mod:`onetool.core.calls` makes the calls."""

from onetool.registry._local import load_local_packs
from onetool.registry._registry import Registry
from onetool.registry._sight import Sight, Unseen
from onetool.registry._summary import brief
from onetool.registry._tools import LocalTool, Pack, Tool, UpstreamTool
from onetool.registry.schema import ToolSchema

__all__ = [
    "LocalTool",
    "Pack",
    "Registry",
    "Sight",
    "Tool",
    "ToolSchema",
    "Unseen",
    "UpstreamTool",
    "brief",
    "load_local_packs",
]
