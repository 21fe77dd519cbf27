"""The gateway's log: one record = one escaped line (the records themselves, :class:`LogSpan`); the log file
read back (``file``); the recent runs the console shows (``runs``); one record per MCP request a face answers
(``requests``)."""

from onetool.logs._lines import (
    DEFAULT_RETENTION,
    DEFAULT_ROTATION,
    LEVELS,
    MAX_FIELD_CHARS,
    RECORD_HEAD,
    LogSpan,
    Tracer,
    log_level,
    logger,
    quoted,
    setup_logging,
    trace_context,
    use_tracer,
)

__all__ = [
    "DEFAULT_RETENTION",
    "DEFAULT_ROTATION",
    "LEVELS",
    "MAX_FIELD_CHARS",
    "RECORD_HEAD",
    "LogSpan",
    "Tracer",
    "log_level",
    "logger",
    "quoted",
    "setup_logging",
    "trace_context",
    "use_tracer",
]
