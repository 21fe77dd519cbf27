"""A real HAProxy for tests: the shipped deploy/haproxy.cfg, its addresses given through the environment, in the
foreground, stopped (and reaped) on the way out. Without HAProxy (Debian's `haproxy`; `.ci/run` installs it) the
tests that need it are skipped."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.conftest import wait_for_port
from tests.processes import stop

__all__ = ["HAPROXY_CFG", "check_config", "haproxy_bin", "missing", "running_haproxy"]

HAPROXY_CFG = Path(__file__).resolve().parent.parent / "deploy" / "haproxy.cfg"


DEBIAN_HAPROXY = "/usr/sbin/haproxy"
"""Where Debian installs it: in /usr/sbin, which an unprivileged user's PATH often lacks."""


def haproxy_bin() -> str | None:
    return shutil.which("haproxy") or (DEBIAN_HAPROXY if os.access(DEBIAN_HAPROXY, os.X_OK) else None)


def missing() -> str | None:
    """Why HAProxy cannot be started here, or None."""
    return None if haproxy_bin() else "HAProxy is not installed (haproxy)"


def check_config(env: dict[str, str], cfg: Path = HAPROXY_CFG) -> subprocess.CompletedProcess[str]:
    """``haproxy -c`` on ``cfg`` with ``env`` added to the environment: its verdict, and what it said."""
    binary = haproxy_bin()
    assert binary, missing()
    return subprocess.run(
        [binary, "-c", "-f", str(cfg)], env={**os.environ, **env}, capture_output=True, text=True, timeout=30
    )


@contextmanager
def running_haproxy(port: int, env: dict[str, str], log: Path, cfg: Path = HAPROXY_CFG) -> Iterator[None]:
    """HAProxy on ``cfg`` with ``env`` added, once it accepts connections on 127.0.0.1:``port`` (the frontend's
    bind, which ``env`` must set); it logs to ``log``."""
    checked = check_config(env, cfg)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    binary = haproxy_bin()
    assert binary, missing()
    with open(log, "w") as out:
        # -db: in the foreground, one process that SIGTERM ends.
        proc = subprocess.Popen(
            [binary, "-db", "-f", str(cfg)], env={**os.environ, **env}, stdout=out, stderr=subprocess.STDOUT
        )
    try:
        try:
            wait_for_port(port)
        except TimeoutError:
            raise AssertionError(f"HAProxy is not listening (exit status {proc.poll()}): {log.read_text()}") from None
        yield
    finally:
        stopped = stop(proc, 5)
    assert stopped, "HAProxy did not stop within 5 s of SIGTERM (killed)"
