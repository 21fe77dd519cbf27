"""Runs untrusted Python snippets: RestrictedPython as the language layer, a confined worker process
(empty environment and directory, rlimits, seccomp) as the security boundary. Imports nothing from onetool."""

from sandbox.host.pool import Sandbox
from sandbox.protocol.api import Limits, OnCall, OnProgress, OnSites, Origin, RunError, RunResult
from sandbox.protocol.errors import (
    TOOL_ERRORS,
    ArgumentError,
    LimitError,
    PolicyError,
    ToolError,
    ToolTimeout,
    ToolUnavailable,
    UnknownTool,
)
from sandbox.protocol.messages import PROGRESS_RATE, Ration, one_line
from sandbox.protocol.sites import Site
from sandbox.protocol.verdicts import Verdict
from sandbox.worker.policy import ALLOWED_MODULES

__all__ = [
    "ALLOWED_MODULES",
    "PROGRESS_RATE",
    "TOOL_ERRORS",
    "ArgumentError",
    "LimitError",
    "Limits",
    "OnCall",
    "OnProgress",
    "OnSites",
    "Origin",
    "PolicyError",
    "Ration",
    "RunError",
    "RunResult",
    "Sandbox",
    "Site",
    "ToolError",
    "ToolTimeout",
    "ToolUnavailable",
    "UnknownTool",
    "Verdict",
    "one_line",
]
