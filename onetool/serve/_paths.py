"""Where the faces other than ``run`` are mounted, for the FACES table and the messages that point at them."""

from __future__ import annotations

DIRECT_PATH = "/mcp/direct"
DIRECT_ALIAS = "/direct/mcp"
"""The direct face again, at a path that ends in /mcp: the MCP Inspector's CLI rewrites any other to /mcp."""
