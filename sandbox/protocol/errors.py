"""The exceptions a snippet can see and catch; dependency-free so the worker starts fast.

A pack call that fails raises a `ToolError` inside the snippet, or one of its subclasses naming the kind
of failure, so snippet code can tell a timeout from an unavailable server from a bad argument by type:

    try:
        github.search(q="x")
    except ToolTimeout:
        ...
    except ToolError as e:
        ...

The host says which kind with the class name (`TOOL_ERRORS`); anything else it raises is a plain
`ToolError`. `LimitError` and `PolicyError` come from the sandbox itself.
"""

__all__ = [
    "SNIPPET_ERRORS",
    "TOOL_ERRORS",
    "ArgumentError",
    "LimitError",
    "PolicyError",
    "ToolError",
    "ToolTimeout",
    "ToolUnavailable",
    "UnknownTool",
]


class ToolError(Exception):
    """A pack call failed: the tool reported an error, or the call could not be made."""


class ToolTimeout(ToolError):
    """The tool did not answer within its server's timeout; the upstream was told to cancel."""


class ToolUnavailable(ToolError):
    """The tool's server is not connected (failed, disabled, or reconnecting)."""


class ArgumentError(ToolError):
    """The arguments do not fit the tool's signature or schema."""


class UnknownTool(ToolError):
    """The pack has no such tool."""


class LimitError(Exception):
    """A per-run limit (calls, output, message size, time) was reached."""


class PolicyError(Exception):
    """The language layer refused an operation."""


TOOL_ERRORS: dict[str, type[ToolError]] = {
    cls.__name__: cls for cls in (ToolError, ToolTimeout, ToolUnavailable, ArgumentError, UnknownTool)
}
"""Every pack-call error kind by name: what the host may name in a reply, and what the snippet can catch."""

SNIPPET_ERRORS: dict[str, type[Exception]] = {**TOOL_ERRORS, "LimitError": LimitError, "PolicyError": PolicyError}
"""Every exception class the sandbox adds to a snippet's builtins."""
