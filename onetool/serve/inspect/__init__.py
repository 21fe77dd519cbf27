"""The inspect/exec face: two MCP tools, ``inspect`` and ``exec`` (``/mcp/inspect``; ``serve --mode inspect``)."""

from onetool.serve.inspect._face import EXEC_DESCRIPTION, EXEC_INPUT_SCHEMA, INSPECT_INPUT_SCHEMA, build_inspect_server

__all__ = ["EXEC_DESCRIPTION", "EXEC_INPUT_SCHEMA", "INSPECT_INPUT_SCHEMA", "build_inspect_server"]
