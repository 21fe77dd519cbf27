"""LogSpan: one structured record per block, with status, duration and error fields."""

from __future__ import annotations

import argparse
import io
import logging
import os
import re
import stat
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from onetool.cli._common import setup
from onetool.errors import UnknownTool
from onetool.logs import LogSpan, _lines, logger, setup_logging
from onetool.logs.file import rotated_files
from onetool.text import public_urls
from tests.conftest import PYTHON, logging_as_configured, restoring_logging, spans


def test_success_record(log_records: list) -> None:
    with LogSpan("proxy.connect", server="a") as span:
        span.add(toolCount=3)
    (record,) = spans(log_records, "proxy.connect")
    assert record["status"] == "SUCCESS"
    assert record["server"] == "a" and record["toolCount"] == 3
    assert record["duration"] >= 0
    assert "errorType" not in record


def test_failure_record(log_records: list) -> None:
    with pytest.raises(ValueError), LogSpan("proxy.tool.call", server="a", tool="t"):
        raise ValueError("bad input")
    (record,) = spans(log_records, "proxy.tool.call")
    assert record["status"] == "FAILED"
    assert record["errorType"] == "ValueError" and record["errorMessage"] == "bad input"
    assert [r["level"] for r in log_records if r["extra"].get("span")] == ["WARNING"]


def test_failure_without_exception(log_records: list) -> None:
    with LogSpan("run") as span:
        span.add(status="FAILED", errorType="ToolError", errorMessage="nope")
    (record,) = spans(log_records, "run")
    assert record["status"] == "FAILED" and record["errorType"] == "ToolError"


@contextmanager
def logged_lines() -> Iterator[io.StringIO]:
    """The text setup_logging writes, as the operator reads it."""
    sink = io.StringIO()
    with logging_as_configured(sink=sink):
        yield sink


def test_logged_lines_are_single_line_escaped_and_capped() -> None:
    """Snippet or upstream data in a field or message cannot forge a record or reach the terminal raw."""
    forged = "x\n12:00:00.000 INFO    run status=SUCCESS\x1b[31m\u2028" + chr(0xD800)
    with logged_lines() as sink:
        with LogSpan("run") as span:
            span.add(status="FAILED", errorMessage=forged + "y" * 5000)
        logger.warning("upstream said {}", forged)
    lines = sink.getvalue().splitlines()
    assert len(lines) == 2
    assert "\\n12:00:00.000" in lines[0] and "\\x1b[31m" in lines[0] and "\\u2028" in lines[0]
    assert "\\ud800" in lines[0] and "\x1b" not in sink.getvalue()
    assert "more characters]" in lines[0] and len(lines[0]) < 1500
    assert lines[1].endswith('"upstream said x\\n12:00:00.000 INFO    run status=SUCCESS\\x1b[31m\\u2028\\ud800"')


def test_a_value_cannot_leave_its_field() -> None:
    """`" status=SUCCESS runId=abc` and a line break in an error message stay inside the quoted errorMessage."""
    injected = 'bad" status=SUCCESS runId=abc\n'
    with logged_lines() as sink, LogSpan("run", runId="r1") as span:
        span.add(status="FAILED", errorType="ValueError", errorMessage=injected, errorOrigin="code")
    (line,) = sink.getvalue().splitlines()
    assert 'errorMessage="bad\\" status=SUCCESS runId=abc\\n"' in line
    fields = dict(re.findall(r' (\w+)=("(?:[^"\\]|\\.)*"|\S+)', line))
    assert fields["status"] == "FAILED" and fields["runId"] == "r1" and fields["errorOrigin"] == "code"
    assert fields["errorMessage"] == '"bad\\" status=SUCCESS runId=abc\\n"'


@pytest.mark.parametrize(
    "invisible",
    ["\u202e", "\u2066", "\u200e", "\u061c", "\u200b", "\u2060", "\ufeff", "\U000e0041", "\x85", "\x07", "\x7f"],
)
def test_bidi_zero_width_and_tag_characters_are_escaped(invisible: str) -> None:
    with logged_lines() as sink:
        logger.info("said", text=f"a{invisible}b")
    line = sink.getvalue()
    assert invisible not in line
    assert invisible.encode("unicode_escape").decode() in line


def test_the_log_file_rotates_at_its_size_and_keeps_the_newest_files(tmp_path: Path) -> None:
    log = tmp_path / "gateway.log"
    with logging_as_configured(file=log, rotation=2_000, retention=2):
        for i in range(100):  # about 8 KB: four rotations
            logger.info("record {}", i, server="fx", padding="p" * 40)
    rotated = rotated_files(log)
    assert len(rotated) == 2, sorted(p.name for p in tmp_path.iterdir())
    assert all(p.stat().st_size <= 2_000 for p in [*rotated, log])
    assert all(p.stat().st_size > 1_800 for p in rotated)  # each was rotated only when the next record did not fit
    kept = "".join(p.read_text() for p in [*rotated, log]).splitlines()
    assert kept[-1].split()[2:4] == ["record", "99"] and len(kept) < 100
    numbers = [int(line.split()[3]) for line in kept]
    assert numbers == list(range(numbers[0], 100))  # the newest records, none lost between the kept files


def test_the_log_file_its_rotations_and_its_new_folder_are_the_owners_alone(tmp_path: Path) -> None:
    """Under umask 022 a file is made 0644: the log (upstream stderr, names, what snippets did) is 0600 instead,
    each rotated file too, and the folders made for it 0700. An existing file loses what others may do with it."""
    log = tmp_path / "new" / "logs" / "gateway.log"
    older = tmp_path / "older.log"
    older.write_text("")
    older.chmod(0o644)
    previous = os.umask(0o022)
    try:
        with logging_as_configured(file=log, rotation=2_000, retention=3):
            for i in range(100):  # about 8 KB: four rotations, three kept
                logger.info("record {}", i, padding="p" * 40)
        with logging_as_configured(file=older):
            logger.info("again")
    finally:
        os.umask(previous)
    files = [log, *rotated_files(log)]
    assert len(files) == 4
    assert {stat.S_IMODE(p.stat().st_mode) for p in files} == {0o600}
    assert {stat.S_IMODE(p.stat().st_mode) for p in (log.parent, log.parent.parent)} == {0o700}
    assert stat.S_IMODE(older.stat().st_mode) == 0o640


def test_the_config_log_section_names_the_file_and_its_rotation(tmp_path: Path) -> None:
    config = tmp_path / "onetool.yaml"
    config.write_text("log:\n  file: gw.log\n  rotation: 1 KB\n  retention: 1\n")
    with restoring_logging():
        setup(argparse.Namespace(config=str(config), log_level="INFO", log_file=None), "INFO")
        for i in range(40):  # about 1.2 KB
            logger.info("record {}", i)
    log = tmp_path / "gw.log"  # relative to the config file
    assert len(rotated_files(log)) == 1 and log.stat().st_size <= 1_000


# ---- tracebacks on failed spans ------------------------------------------------------------------------------------


def _failing_span(error: Exception) -> None:
    with pytest.raises(type(error)), LogSpan("demo.span"):
        raise error


def test_a_span_that_fails_unexpectedly_carries_its_traceback(log_records: list[dict[str, Any]]) -> None:
    _failing_span(RuntimeError("a host bug"))
    _failing_span(UnknownTool("no such tool"))
    records = [r for r in log_records if r["extra"].get("span") == "demo.span"]
    assert [(r["extra"]["errorType"], r["traced"]) for r in records] == [("RuntimeError", True), ("UnknownTool", False)]


def test_a_cause_caught_below_the_span_is_traced_when_unexpected_or_at_debug(
    log_records: list[dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    def span(expected: bool) -> None:
        with LogSpan("demo.caught") as s:
            try:
                raise OSError("refused")
            except OSError as e:
                s.attach(e, expected=expected)
            s.add(status="FAILED")

    span(expected=True)
    span(expected=False)
    monkeypatch.setattr(_lines, "_all_tracebacks", True)  # what setup_logging("DEBUG") sets
    span(expected=True)
    assert [r["traced"] for r in log_records if r["extra"].get("span") == "demo.caught"] == [False, True, True]


def test_debug_logging_traces_every_failure(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_lines, "_all_tracebacks", False)
    sink = io.StringIO()
    with restoring_logging():
        setup_logging("DEBUG", sink=sink)
        _failing_span(UnknownTool("no such tool"))
        setup_logging("INFO", sink=sink)
        _failing_span(UnknownTool("another"))
    text = sink.getvalue()
    assert text.count("Traceback") == 1 and "no such tool" in text and "another" in text


def _library_records() -> None:
    """What the libraries say through stdlib logging, as the mcp SDK, uvicorn and the sandbox do."""
    try:
        raise ValueError("a body past the cap")
    except ValueError:
        logging.getLogger("mcp.client.streamable_http").exception("Error parsing JSON response")
    logging.getLogger("httpx").info("HTTP Request: POST http://127.0.0.1/mcp 200 OK")
    logging.getLogger("uvicorn.error").warning("Invalid HTTP request received.")
    logging.getLogger("sandbox.host._launch").debug("no pid namespace for the fork-server")
    try:
        raise RuntimeError("state=s3cr3t-state")
    except RuntimeError:
        logging.getLogger("mcp.client.auth.oauth2").exception("token exchange failed")


def test_the_libraries_stdlib_records_reach_the_sink_in_its_format() -> None:
    """Their warnings and errors, with a failure's traceback, named by their logger; their chatter below WARNING
    stays out, and so does the sandbox's below OneTool's level."""
    with logged_lines() as sink:
        _library_records()
    lines = sink.getvalue().splitlines()
    head = r"\d\d:\d\d:\d\d\.\d{3} ERROR +Error parsing JSON response source=mcp.client.streamable_http"
    assert re.match(head, lines[0]), lines
    assert "Traceback" in lines[1] and "ValueError: a body past the cap" in sink.getvalue()
    assert "WARNING Invalid HTTP request received. source=uvicorn.error" in sink.getvalue()
    assert "HTTP Request" not in sink.getvalue() and "pid namespace" not in sink.getvalue()
    assert "s3cr3t" not in sink.getvalue()


def test_at_debug_the_sandbox_speaks_and_the_sdk_oauth_records_carry_no_exception() -> None:
    sink = io.StringIO()
    with restoring_logging():
        setup_logging("DEBUG", sink=sink)
        _library_records()
    text = sink.getvalue()
    assert "DEBUG   no pid namespace for the fork-server source=sandbox.host._launch" in text
    assert "DEBUG   token exchange failed source=mcp.client.auth.oauth2" in text
    assert "s3cr3t" not in text and "HTTP Request" not in text


@pytest.mark.parametrize("level", ["INFO", "silent"])
def test_a_library_error_is_written_as_a_record_or_not_at_all(level: str) -> None:
    """In a process of its own: pytest's capture would otherwise stand in for stdlib's last-resort handler, which
    writes a bare message to stderr when nothing routes the record."""
    code = (
        "import logging, sys\n"
        "from onetool.logs import setup_logging\n"
        f"setup_logging({level!r})\n"
        "logging.getLogger('mcp.client.sse').error('Error in sse_reader')\n"
    )
    stderr = subprocess.run([PYTHON, "-c", code], capture_output=True, text=True, check=True).stderr
    if level == "silent":
        assert stderr == ""
    else:
        assert re.fullmatch(r"\d\d:\d\d:\d\d\.\d{3} ERROR +Error in sse_reader source=mcp.client.sse\n", stderr)


def test_the_sdk_oauth_records_never_show_their_exception_even_before_logging_is_set_up() -> None:
    code = (
        "import logging\n"
        "import onetool.logs\n"
        "try:\n"
        "    raise RuntimeError('state=s3cr3t-state')\n"
        "except RuntimeError:\n"
        "    logging.getLogger('mcp.client.auth.oauth2').exception('OAuth flow error')\n"
    )
    stderr = subprocess.run([PYTHON, "-c", code], capture_output=True, text=True, check=True).stderr
    assert "OAuth flow error" in stderr and "s3cr3t" not in stderr, stderr


def test_a_url_a_library_names_keeps_its_userinfo_and_query_out_of_the_log() -> None:
    """The SDK and httpx name URLs in their messages and exception texts (an HTTP error says which URL failed);
    a key in a URL's userinfo or query string stays out of the log, in the message and in the traceback."""
    url = "https://user:pw-s3cr3t@mcp.example.com:8443/messages/?session_id=s3cr3t-session&key=s3cr3t#s3cr3t"
    with logged_lines() as sink:
        logging.getLogger("mcp.client.sse").warning(f"Redirect to {url} not followed")
        try:
            raise RuntimeError(f"Client error '400 Bad Request' for url '{url}'")
        except RuntimeError:
            logging.getLogger("mcp.client.sse").exception("Error in post_writer")
    text = sink.getvalue()
    assert "s3cr3t" not in text, text
    assert "Redirect to https://mcp.example.com:8443/messages/ not followed" in text
    assert "for url 'https://mcp.example.com:8443/messages/'" in text


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("at http://[::1]:9000/mcp?token=t, then", "at http://[::1]:9000/mcp, then"),
        ("'wss://a:b@host/ws#f' and ftp://h/x", "'wss://host/ws' and ftp://h/x"),
        ("bad port http://host:x/y?token=t", "bad port http://..."),
        ("no url here: a://", "no url here: a://"),
    ],
)
def test_public_urls_shows_every_url_in_a_text_without_what_may_be_a_secret(text: str, shown: str) -> None:
    assert public_urls(text) == shown
