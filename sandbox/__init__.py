"""Runs untrusted Python snippets: RestrictedPython as the language layer, a confined worker process
(empty environment and directory, rlimits, seccomp) as the security boundary. Imports nothing from onetool."""

from sandbox.api import Limits, OnCall, OnProgress, Origin, RunError, RunResult
from sandbox.errors import (
    SNIPPET_ERRORS,
    TOOL_ERRORS,
    ArgumentError,
    LimitError,
    PolicyError,
    ToolError,
    ToolTimeout,
    ToolUnavailable,
    UnknownTool,
)
from sandbox.messages import PROGRESS_RATE, Ration, one_line
from sandbox.policy import ALLOWED_MODULES, CompileFailure, parse
from sandbox.pool import Sandbox

__all__ = [
    "ALLOWED_MODULES",
    "PROGRESS_RATE",
    "SNIPPET_ERRORS",
    "TOOL_ERRORS",
    "ArgumentError",
    "CompileFailure",
    "LimitError",
    "Limits",
    "OnCall",
    "OnProgress",
    "Origin",
    "PolicyError",
    "Ration",
    "RunError",
    "RunResult",
    "Sandbox",
    "ToolError",
    "ToolTimeout",
    "ToolUnavailable",
    "UnknownTool",
    "one_line",
    "parse",
]
