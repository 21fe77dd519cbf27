"""Serve at once: how soon `onetool serve --http` answers /health while one upstream hangs in initialize and
another takes 12 s to start (before, the URL appeared only once every first connect attempt had ended)."""

from __future__ import annotations

import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import yaml

from bench import Row, serving

ROOT = Path(__file__).resolve().parent.parent
ONETOOL = str(Path(sys.executable).with_name("onetool"))
FAULT = str(ROOT / "tests/fixtures/fault_server.py")
STARTS = 3


def _config(folder: Path) -> Path:
    servers = {
        "hangs": {"command": sys.executable, "args": [FAULT, "hang"], "connect_timeout": 120},
        "slow": {"command": "sh", "args": ["-c", f"sleep 12; exec {sys.executable} {FAULT} ok"]},
    }
    path = folder / "onetool.yaml"
    path.write_text(yaml.safe_dump({"servers": servers}))
    return path


def _health_after(config: Path) -> tuple[float, float]:
    """Seconds from the start until the URL was printed, and until /health answered 200."""
    start = time.perf_counter()
    with serving([ONETOOL, "serve", "--http", "--port", "0", "--config", str(config), "--log-level", "WARNING"]) as url:
        printed = time.perf_counter() - start
        with urllib.request.urlopen(url.replace("/mcp", "/health"), timeout=30) as answer:
            assert answer.status == 200
        return printed, time.perf_counter() - start


async def run() -> list[Row]:
    with tempfile.TemporaryDirectory() as folder:
        config = _config(Path(folder))
        samples = [_health_after(config) for _ in range(STARTS)]
    worst_url, worst_health = (max(s[i] for s in samples) for i in range(2))
    return [
        Row("startup", "URL printed, one upstream hung, one 12 s late (worst of 3)", f"{worst_url:.2f} s"),
        Row("startup", "/health answered, same upstreams (worst of 3)", f"{worst_health:.2f} s", "< 2 s"),
    ]
