"""The inspect/exec face's pure parts: compressed schemas, TOON results, the ``inspect`` description."""

from onetool.inspect._describe import (
    HIDDEN_STATES,
    INSTRUCTIONS_MAX_CHARS,
    InspectServer,
    InspectTool,
    ServerLike,
    ToolLike,
    describe_inspect,
    find_server,
    find_tool,
    inspect_schemas,
)
from onetool.inspect._toon import DEFAULT_MAX_CHARS, data_result, exec_result
from onetool.inspect.compress import compress

__all__ = [
    "DEFAULT_MAX_CHARS",
    "HIDDEN_STATES",
    "INSTRUCTIONS_MAX_CHARS",
    "InspectServer",
    "InspectTool",
    "ServerLike",
    "ToolLike",
    "compress",
    "data_result",
    "describe_inspect",
    "exec_result",
    "find_server",
    "find_tool",
    "inspect_schemas",
]
