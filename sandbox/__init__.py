"""Runs untrusted Python snippets: RestrictedPython as the language layer, a confined worker process
(empty environment and directory, rlimits, seccomp) as the security boundary. Imports nothing from onetool.

Its parts say which side of the process boundary they run on:

- `sandbox.host`: the gateway process: `Sandbox`, run slots, the host's memory budget, decoding what a worker
  sends, the fork-server's client.
- `sandbox.worker`: the fork-server (zygote) and the confined workers it forks: confinement, the language
  layer, running one snippet. Started by module path; never imports the host side.
- `sandbox.protocol`: what both sides speak: the public data types, the snippet's exceptions, the frames and
  messages of a run, the host's verdicts.

This module is the gateway's way in; the fork-server never executes it.
"""

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
