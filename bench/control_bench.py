"""The control plane: `onetool run` on a running gateway vs standalone, list_changed delay after admin actions."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import yaml

from bench import Row, list_changed_delays, median_p90, ms, serving

ROOT = Path(__file__).resolve().parent.parent
ONETOOL = str(Path(sys.executable).with_name("onetool"))
TIME_SERVER = str(Path(sys.executable).with_name("mcp-server-time"))


def _wall(args: list[str], env: dict[str, str], n: int) -> list[float]:
    samples = []
    for _ in range(n):
        start = time.perf_counter()
        subprocess.run([ONETOOL, *args], capture_output=True, check=True, env=env)
        samples.append(time.perf_counter() - start)
    return samples


def _admin(url: str, token: str, path: str) -> None:
    request = urllib.request.Request(
        url.rsplit("/mcp", 1)[0] + path, method="POST", headers={"Authorization": f"Bearer {token}"}
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        response.read()


async def run() -> list[Row]:
    rows: list[Row] = []
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        config = folder / "onetool.yaml"
        config.write_text(yaml.safe_dump({"servers": {"time": {"command": TIME_SERVER}}}))
        env = {**os.environ, "ONETOOL_STATE_DIR": str(folder / "state"), "ONETOOL_RUNTIME_DIR": str(folder / "run")}
        alone = {**env, "ONETOOL_RUNTIME_DIR": str(folder / "no-gateway")}
        standalone = _wall(["run", "--config", str(ROOT / "onetool.yaml"), "-c", "1+1"], alone, 3)
        command = [ONETOOL, "serve", "--http", "--port", "0", "--config", str(config), "--log-level", "WARNING"]
        with serving(command, env) as url:
            [record] = (folder / "run" / "gateways").glob("*.json")  # the one gateway of this runtime folder
            token = json.loads(record.read_text())["admin_token"]
            attached = _wall(["run", "--config", str(config), "-c", "1+1"], env, 20)  # the served config's gateway
            delays = await list_changed_delays(
                url,
                20,
                lambda i: _admin(url, token, f"/admin/servers/time/{('disable', 'enable')[i % 2]}"),
                lambda: 0.3,
            )
    rows.append(
        Row("control", "onetool run -c '1+1' attached, wall (median / p90 of 20)", median_p90(attached), "0.3 s")
    )
    rows.append(
        Row(
            "control",
            "onetool run -c '1+1' standalone, example config (median of 3)",
            ms(statistics.median(standalone)),
        )
    )
    rows.append(
        Row("control", "admin disable/enable -> list_changed on /mcp (median / p90 of 20)", median_p90(delays), "1 s")
    )
    return rows
