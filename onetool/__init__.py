"""OneTool: an MCP gateway with one tool, run(code)."""

__version__ = "0.1.0"
