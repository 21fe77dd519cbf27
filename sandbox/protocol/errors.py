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
`ToolError`. One the host sent says which call failed and whose failure it was:

    except ToolError as e:
        e.server, e.tool, e.origin   # "github", "search", "tool" (the tool failed) or "host" (OneTool decided)

`server` is the configured server behind the pack (None for a local pack), `tool` the tool as the snippet called
it; a ToolError the snippet makes itself has origin "code". `LimitError` and `PolicyError` come from the sandbox
itself.
"""

__all__ = [
    "ORIGINS",
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


ORIGINS = ("host", "tool")
"""Whose failure a ToolError the host sent is: OneTool's ("host") or the tool's ("tool")."""


class ToolError(Exception):
    """A pack call failed: the tool reported an error, or the call could not be made."""

    def __init__(self, *args: object, server: str | None = None, tool: str | None = None, origin: str = "code") -> None:
        super().__init__(*args)
        self.server = server
        self.tool = tool
        self.origin = origin


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
