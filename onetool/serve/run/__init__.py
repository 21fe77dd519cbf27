"""The `run` face: one MCP tool, ``run(code)`` (``/mcp``, and stdio by default)."""

from onetool.serve.run._face import INSTRUCTIONS, RUN_INPUT_SCHEMA, build_run_server, call_run, run_tool

__all__ = ["INSTRUCTIONS", "RUN_INPUT_SCHEMA", "build_run_server", "call_run", "run_tool"]
