"""`onetool logs`: the gateway's log records, filtered by server, run and level, and followed as they come."""

from __future__ import annotations

import argparse
import sys

from onetool.cli._common import EXIT_FAILED, EXIT_OK, EXIT_USAGE


def cmd_logs(args: argparse.Namespace) -> int:
    """Print the records of the log file (``--log-file``, else the config's ``log.file``), its rotated files first.

    Each line is printed escaped as the log escapes it (:func:`~onetool.text.escape_unsafe`): what a file holds
    beyond what OneTool wrote, such as a traceback's raw text, cannot drive the terminal either.
    """
    from itertools import chain
    from pathlib import Path

    from onetool.config import find_config, load_config
    from onetool.logs import log_level
    from onetool.logs.file import RecordFilter, follow, read_lines, rotated_files
    from onetool.text import escape_unsafe

    path = Path(args.log_file) if args.log_file else load_config(find_config(args.config)).log.file
    if path is None:
        return _refuse("no log file: the gateway logs to stderr unless log.file or --log-file names one", EXIT_USAGE)
    if not args.follow and not path.exists():
        return _refuse(f"{path}: no such file", EXIT_FAILED)
    level = log_level(args.level, "--level") if args.level else None
    if args.level and level is None:
        return _refuse(f"--level {args.level} would show nothing; name the lowest level to show", EXIT_USAGE)
    fields = {key: value for key, value in (("server", args.server), ("runId", args.run)) if value is not None}
    keep = RecordFilter(level, fields)
    current = follow(path) if args.follow else read_lines([path])
    for line in chain(read_lines(rotated_files(path)), current):
        if keep(line):
            print(escape_unsafe(line), flush=args.follow)  # a reader gone (`| head`): see onetool.cli.main
    return EXIT_OK


def _refuse(message: str, status: int) -> int:
    print(f"onetool logs: {message}", file=sys.stderr)
    return status
