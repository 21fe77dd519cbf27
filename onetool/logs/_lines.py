"""Logging: loguru to stderr (or a file), never stdout, and :class:`LogSpan`.

stdout is the MCP channel in stdio mode, so nothing here may write to it.
Structured fields live in each record's ``extra``; the stderr line shows them
as ``key=value`` after the message. Values bound with
``logger.contextualize(runId=...)`` ride along on every record of that run.
A log file is rotated by size and only the newest rotated files are kept, so a
gateway that runs for months does not fill its disk. The libraries' own stdlib
``logging`` records (the mcp SDK, uvicorn, httpx) reach the same sink
(:class:`_FromStdlib`), never stderr on their own.
"""

from __future__ import annotations

import logging
import os
import re
import sys
import time
import traceback
from collections.abc import Callable, MutableMapping
from pathlib import Path
from types import TracebackType
from typing import Any, Protocol, TextIO

from loguru import logger

from onetool.errors import ConfigError, OneToolError
from onetool.private import private_dir
from onetool.text import escape_unsafe, public_urls

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

_FORMAT = "{time:HH:mm:ss.SSS} {level: <7} {message}{extra[_kv]}"
_RECORD = _FORMAT + "\n"
_RECORD_AND_TRACEBACK = _FORMAT + "{extra[_traceback]}\n"
RECORD_HEAD = re.compile(r"\d\d:\d\d:\d\d\.\d{3} (?P<level>[A-Z]+) +")
"""The start of a record's first line as _FORMAT writes it (change both together); any other line continues the
record before it (a traceback)."""

DEFAULT_ROTATION = 10_000_000
"""Bytes a log file grows to before it is rotated (``log.rotation``)."""
DEFAULT_RETENTION = 5
"""Rotated log files kept (``log.retention``)."""


MAX_FIELD_CHARS = 1_000
"""A logged field or message longer than this is cut: snippet and upstream data can be megabytes."""
_BARE = re.compile(r"[\w.:/@+%,-]+", re.ASCII)
"""A value shown as it is; any other is quoted, so no text a value holds reads as another field."""


def _escaped(value: Any) -> str:
    """``value`` as a capped, single-line, escaped string: data cannot forge a record or a terminal escape."""
    return escape_unsafe(_capped(value))


def quoted(value: Any) -> str:
    """``value`` as one field of a record (logfmt): a plain token as it is, anything else in double quotes with
    ``\\`` and ``"`` escaped, then what :func:`_escaped` escapes. ``x" status=SUCCESS runId=abc`` inside an
    error message stays inside its field."""
    text = _capped(value)
    if len(text) <= MAX_FIELD_CHARS and _BARE.fullmatch(text):
        return text
    return '"' + escape_unsafe(text.replace("\\", "\\\\").replace('"', '\\"')) + '"'


def _capped(value: Any) -> str:
    text = value if isinstance(value, str) else str(value)
    if len(text) > MAX_FIELD_CHARS:
        text = f"{text[:MAX_FIELD_CHARS]}...[{len(text) - MAX_FIELD_CHARS:,} more characters]"
    return text


def _with_kv(record: Any) -> None:
    extra = record["extra"]
    kv = " ".join(f"{k}={quoted(v)}" for k, v in extra.items() if not k.startswith("_"))
    extra["_kv"] = f" {kv}" if kv else ""
    # The message is quoted as a field is when it holds what could read as a field (`=`) or a quote.
    message = record["message"]
    record["message"] = quoted(message) if "=" in message or '"' in message else _escaped(message)


LEVELS: dict[str, str | None] = {
    "debug": "DEBUG",
    "info": "INFO",
    "warning": "WARNING",
    "warn": "WARNING",
    "error": "ERROR",
    "critical": "CRITICAL",
    "fatal": "CRITICAL",
    "silent": None,
    "off": None,
}
"""The log levels an operator may name, in any case; None: no logs at all."""


def log_level(text: str, source: str = "LOG_LEVEL") -> str | None:
    """The loguru level ``text`` names (None: silent); a ConfigError in one line, naming ``source`` (the variable
    or option it came from), for anything else: the CLI exits with status 2 rather than a traceback."""
    try:
        return LEVELS[text.strip().lower()]
    except KeyError:
        shown = text if len(text) <= 40 else f"{text[:40]}..."
        raise ConfigError(
            f"{source}={quoted(shown)} is not a log level: use debug, info, warning (warn), error, "
            "critical (fatal) or silent (off)"
        ) from None


def setup_logging(
    level: str | None = None,
    file: str | os.PathLike[str] | None = None,
    sink: TextIO | None = None,
    *,
    rotation: int = DEFAULT_ROTATION,
    retention: int = DEFAULT_RETENTION,
) -> None:
    """Send logs to ``file`` or stderr at ``level`` (default ``$LOG_LEVEL`` or INFO), named as :func:`log_level`
    takes it; silent or off sends them nowhere. A ``file`` is rotated once it reaches ``rotation`` bytes (renamed
    with its creation time, e.g. ``gateway.2026-11-25_14-02-03_123456.log``), keeping the newest ``retention``
    rotated files. The file, and a folder made for it, are the owner's alone (0600, 0700)."""
    global _all_tracebacks
    name = log_level(level or os.environ.get("LOG_LEVEL") or "INFO")
    _all_tracebacks = name in ("TRACE", "DEBUG")
    logger.remove()
    logger.configure(patcher=_with_kv)
    _route_stdlib(name)
    if name is None:
        return
    options: dict[str, Any] = {"level": name, "format": _format, "colorize": False}
    if file:
        private_dir(Path(file).absolute().parent)
        logger.add(os.fspath(file), rotation=rotation, retention=retention, opener=_private, **options)
    else:
        logger.add(sink or sys.stderr, **options)


def _private(path: str, flags: int) -> int:
    """Open the log file (and each new one after a rotation) readable by its owner only, whatever the umask: it
    holds upstream stderr, server and tool names, and what snippets did. A file that exists loses what others (not
    its group) may do with it."""
    fd = os.open(path, flags, 0o600)
    mode = os.fstat(fd).st_mode
    if mode & 0o007:
        os.fchmod(fd, mode & 0o770)
    return fd


def _format(record: Any) -> str:
    """_FORMAT, then the record's traceback, if it has one, with every line indented and escaped: an exception's
    text (a snippet's argument in a pack's error, an upstream's words) cannot start a line that reads as a record of
    its own (RECORD_HEAD), nor drive a terminal. Python's own traceback: no variable values, and no URL's userinfo
    or query (an HTTP error names the URL it failed on), which may hold secrets."""
    exception = record["exception"]
    if exception is None:
        return _RECORD
    text = public_urls("".join(traceback.format_exception(exception.type, exception.value, exception.traceback)))
    record["extra"]["_traceback"] = "".join(f"\n  {escape_unsafe(line)}" for line in text.splitlines())
    return _RECORD_AND_TRACEBACK


_all_tracebacks = False
"""Whether every failed span carries its exception's traceback (at DEBUG), not only the unexpected ones."""

_OWN_STDLIB_LOGGERS = ("sandbox",)
"""Our packages that log through stdlib ``logging`` (the sandbox imports nothing of OneTool's): at OneTool's level.
Every other library's records count from WARNING: httpx and httpcore trace every request below it."""
_QUIETED = ("mcp.client.auth",)
"""Loggers whose records are demoted to DEBUG and carry no exception: the SDK's OAuth messages and exceptions can
hold the ``state`` value."""


class _FromStdlib(logging.Handler):
    """A stdlib ``logging`` record as a loguru record, ``source`` naming its logger, with the traceback of the
    exception it carries (a library's failure is unexpected, as a span's host bug is). A URL in its message is
    shown without userinfo or query: OneTool's own records pass URLs through ``public_url``, a library's do not."""

    def emit(self, record: logging.LogRecord) -> None:
        quiet = record.name.startswith(_QUIETED)
        level = "DEBUG" if quiet else _STDLIB_LEVELS.get(record.levelno, record.levelno)
        exception = None if quiet else record.exc_info
        logger.opt(exception=exception).bind(source=record.name).log(level, "{}", public_urls(record.getMessage()))


_STDLIB_LEVELS = {
    logging.DEBUG: "DEBUG",
    logging.INFO: "INFO",
    logging.WARNING: "WARNING",
    logging.ERROR: "ERROR",
    logging.CRITICAL: "CRITICAL",
}


def _route_stdlib(level: str | None) -> None:
    """Send every stdlib record to loguru (silent: nowhere, not to stdlib's last-resort stderr)."""
    root = logging.getLogger()
    if not any(isinstance(handler, _FromStdlib) for handler in root.handlers):
        root.addHandler(_FromStdlib())
    root.setLevel(logging.WARNING)
    for name in _OWN_STDLIB_LOGGERS:
        logging.getLogger(name).setLevel(level or logging.WARNING)


def _quiet_from_import() -> None:
    """The quieted loggers reach loguru alone from the moment OneTool is imported, before any setup_logging: their
    records must never meet a handler that would print their exception (stdlib's last resort among them)."""
    for name in _QUIETED:
        quieted = logging.getLogger(name)
        quieted.addHandler(_FromStdlib())
        quieted.propagate = False


_quiet_from_import()


class Tracer(Protocol):
    """Where every :class:`LogSpan` also goes as a trace span, when traces are on (:mod:`onetool.core.traces`)."""

    def start(self, name: str) -> Callable[[dict[str, Any]], None]:
        """Open a span called ``name``, the current one in this context until the returned function ends it with
        the LogSpan's final fields."""
        ...

    def inject(self, headers: MutableMapping[str, str]) -> None:
        """Put the current span's W3C trace context (``traceparent``) into ``headers``."""
        ...


_tracer: Tracer | None = None


def use_tracer(tracer: Tracer | None) -> None:
    """Send every LogSpan from now on to ``tracer`` too (None: to logs only, the default)."""
    global _tracer
    _tracer = tracer


def trace_context(headers: MutableMapping[str, str]) -> None:
    """Add the current span's trace context to an outgoing request's ``headers``, when traces are on."""
    if _tracer is not None:
        _tracer.inject(headers)


class LogSpan:
    """Times a block and logs one record on exit.

    The record's message is the span name; its ``extra`` holds the fields
    given here or with :meth:`add`, plus ``status`` (SUCCESS or FAILED) and
    ``duration`` (seconds), and on failure ``errorType`` and ``errorMessage``.
    Exceptions propagate unchanged. Use as ``with LogSpan("proxy.connect",
    server=name) as span: ...; span.add(toolCount=n)``.

    A failure of an unexpected kind (an exception that is no OneToolError, or one :meth:`attach` marks so) puts
    its traceback on the record; at DEBUG every failure does.

    With traces on (:func:`use_tracer`) the block is also a trace span, a child of the span around it, with the
    record's fields as its attributes: LogSpan is the one place spans are opened.
    """

    def __init__(self, span: str, *, level: str = "INFO", **fields: Any) -> None:
        self.span = span
        self.level = level
        self.fields: dict[str, Any] = dict(fields)
        self._start = 0.0
        self._cause: BaseException | None = None
        self._expected = True
        self._end_trace: Callable[[dict[str, Any]], None] | None = None

    def attach(self, cause: BaseException, *, expected: bool) -> None:
        """Why the span failed, caught below it and not raised through it: its traceback goes on the record when
        it is not ``expected`` (a kind of failure the caller has no words for), or at DEBUG."""
        self._cause, self._expected = cause, expected

    def add(self, **fields: Any) -> None:
        self.fields.update(fields)

    def __enter__(self) -> LogSpan:
        self._start = time.perf_counter()
        self._end_trace = _tracer.start(self.span) if _tracer is not None else None
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        # Kept on the span: who timed a block reads its outcome there afterwards (metrics, the run log).
        self.fields = fields = {**self.fields, "duration": round(time.perf_counter() - self._start, 4)}
        level = self.level
        # A span may set status itself (e.g. an is_error tool result that raised nothing).
        failed = exc is not None or fields.get("status") == "FAILED"
        fields["status"] = "FAILED" if failed else "SUCCESS"
        if exc is not None:
            fields["errorType"] = type(exc).__name__
            fields["errorMessage"] = str(exc) or type(exc).__name__
        if failed and level in ("DEBUG", "INFO"):
            level = "WARNING"
        cause, expected = (exc, isinstance(exc, OneToolError)) if exc is not None else (self._cause, self._expected)
        traced = isinstance(cause, Exception) and failed and (_all_tracebacks or not expected)
        if self._end_trace is not None:
            self._end_trace(fields)
        logger.opt(exception=cause if traced else None).bind(span=self.span, **fields).log(level, self.span)
