"""Several `onetool` commands that end before they start anything (flags refused as usage errors, a config refused
at load), run in ONE real process: a Python that imports onetool once and calls the CLI's own ``main`` for each
command in turn, as the `onetool` script does. Each command's start-up imports (mcp's types, the gateway) cost
about 2 s of CPU; a test of N refusals pays them once instead of N times.

A command that raises (a traceback) fails the runner, and with it the test; one that starts serving instead of
refusing never returns, and the runner's timeout fails the test (the runner is killed)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from tests.gateways import ONETOOL

__all__ = ["Ended", "onetool_each"]


class Ended(subprocess.CompletedProcess[str]):
    """How one command ended, and ``loaded``: the modules the interpreter held after it (each name cut to its first
    two parts, ``onetool.core.gateway``), which a command that is to load nothing heavy can be checked against."""

    def __init__(self, args: list[str], status: int, stdout: str, stderr: str, loaded: list[str]) -> None:
        super().__init__(args, status, stdout, stderr)
        self.loaded = frozenset(loaded)


_RUNNER = r"""
import contextlib, io, json, os, sys
from onetool.cli import main
results = []
for args, env in json.loads(sys.argv[1]):
    saved = dict(os.environ)
    os.environ.update(env)
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            status = main(args)
        except SystemExit as e:  # argparse's own usage errors
            status = e.code if isinstance(e.code, int) else 1
    os.environ.clear()
    os.environ.update(saved)
    loaded = sorted({".".join(name.split(".")[:2]) for name in sys.modules})
    results.append({"status": status, "stdout": out.getvalue(), "stderr": err.getvalue(), "loaded": loaded})
print(json.dumps(results))
"""


def onetool_each(
    commands: Sequence[Sequence[str]],
    *,
    envs: Sequence[Mapping[str, str]] | None = None,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    timeout: float = 60,
) -> list[Ended]:
    """How each command (`onetool ARGS`) ended: its exit status, stdout and stderr. ``envs``: for each command, the
    environment variables it runs with besides ``env``, the process's (default: this one's)."""
    extra = envs if envs is not None else [{} for _ in commands]
    cases = [(list(args), dict(more)) for args, more in zip(commands, extra, strict=True)]
    done = subprocess.run(
        [sys.executable, "-c", _RUNNER, json.dumps(cases)],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=dict(os.environ if env is None else env),
        cwd=cwd,
        check=False,
    )
    assert done.returncode == 0, f"a command raised instead of ending: {done.stderr}"
    results = json.loads(done.stdout.splitlines()[-1])
    return [
        Ended([ONETOOL, *args], r["status"], r["stdout"], r["stderr"], r["loaded"])
        for (args, _), r in zip(cases, results, strict=True)
    ]
