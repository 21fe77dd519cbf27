"""Runs untrusted Python snippets: RestrictedPython as the language layer, a confined worker process
(empty environment and directory, rlimits, seccomp) as the security boundary. Imports nothing from onetool."""

from sandbox.api import Limits, OnCall, RunError, RunResult, ToolError
from sandbox.host import Sandbox

__all__ = ["Limits", "OnCall", "RunError", "RunResult", "Sandbox", "ToolError"]
