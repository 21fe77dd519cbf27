"""Every command's output reaches the terminal escaped, whatever path prints it (issue 42, class 4); the payload
through a real gateway and its hostile upstream is in tests/gateway/test_hostile_trust.py."""

from __future__ import annotations

import argparse
import sys

import pytest

from onetool import cli
from onetool.cli._progress import ProgressLine
from onetool.cli._terminal import escaped_output

PAYLOAD = "name\x1b]52;c;ZXZpbA==\x07 \x1b[2J\u202etxt\u200b\x9b\x7f\r\ttab\nnext"
ESCAPED = "name\\x1b]52;c;ZXZpbA==\\x07 \\x1b[2J\\u202etxt\\u200b\\x9b\\x7f\\r\ttab\nnext"


def commands() -> list[str]:
    parser = cli.build_parser()
    [sub] = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return sorted(sub.choices)


@pytest.mark.parametrize("command", commands())
def test_every_command_writes_through_the_escaping_streams(
    command: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Each command's function prints the payload on stdout and stderr, as a command printing an upstream's name
    would: only the servers (whose stdout may be the MCP channel, and which write only log records, escaped) write
    it as it is."""

    def prints(_args: argparse.Namespace) -> int:
        print(PAYLOAD)
        print(PAYLOAD, file=sys.stderr)
        return 0

    parsed = argparse.Namespace(command=command, func=prints, log_level=None)
    monkeypatch.setattr(cli, "_parse", lambda _parser, _argv: parsed)
    assert cli.main([]) == 0
    out, err = capsys.readouterr()
    expected = PAYLOAD if command in ("serve", "bridge") else ESCAPED
    assert (out, err) == (expected + "\n", expected + "\n")


def test_the_progress_line_keeps_its_own_erase_sequence(capsys: pytest.CaptureFixture[str]) -> None:
    with escaped_output():
        line = ProgressLine()
        line.show(1, 2, "step\x1b[31m")
        line.clear()
    err = capsys.readouterr().err
    assert err == "\r\x1b[2K1/2 step\\x1b[31m\r\x1b[2K"
