"""Exception classes shared by host and worker; dependency-free so the worker starts fast."""


class ToolError(Exception):
    """An error a pack call delivers into the snippet.

    Raised by a host `on_call` on purpose, but any exception from `on_call` reaches the snippet as a
    `ToolError` carrying `str(exc)`. Inside the snippet the same class is the builtin name `ToolError`.
    """
