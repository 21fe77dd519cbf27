"""Runs untrusted Python snippets: RestrictedPython as the language layer, a confined worker process
(empty environment and directory, rlimits, seccomp) as the security boundary. Imports nothing from onetool.

Its parts say which side of the process boundary they run on:

- `sandbox.host`: the gateway process: `Sandbox`, run slots, the host's memory budget, decoding what a worker
  sends, the fork-server's client.
- `sandbox.worker`: the fork-server (zygote) and the confined workers it forks: confinement, the language
  layer, running one snippet. Started by module path; never imports the host side.
- `sandbox.protocol`: what both sides speak: the public data types, the snippet's exceptions, the frames and
  messages of a run, the host's verdicts.

This module is the gateway's way in; the fork-server never executes it. `Sandbox` (anyio, the host side) and
`ALLOWED_MODULES` (the language layer) load on first use, so what only needs the protocol's types (the
gateway's error tree, the CLI talking to a running gateway) imports nothing else.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from sandbox.protocol.api import Limits, OnCall, OnProgress, OnSites, Origin, RunError, RunResult
from sandbox.protocol.caps import PROGRESS_RATE
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
from sandbox.protocol.messages import Ration, one_line
from sandbox.protocol.sites import Site
from sandbox.protocol.verdicts import Verdict

if TYPE_CHECKING:
    from sandbox.host.pool import Sandbox, SandboxLoad
    from sandbox.worker._exports import ALLOWED_MODULES

_LAZY = {
    "Sandbox": "sandbox.host.pool",
    "SandboxLoad": "sandbox.host.pool",
    "ALLOWED_MODULES": "sandbox.worker._exports",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'sandbox' has no attribute {name!r}")


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
    "SandboxLoad",
    "Site",
    "ToolError",
    "ToolTimeout",
    "ToolUnavailable",
    "UnknownTool",
    "Verdict",
    "one_line",
]
