"""parallel() through `run`: ten calls to an upstream tool that sleeps 0.5 s, end to end over MCP."""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

import yaml
from mcp import Client, StdioServerParameters

from bench import Row, median_p90

ROOT = Path(__file__).resolve().parent.parent
ONETOOL = str(Path(sys.executable).with_name("onetool"))
FAULT_SERVER = ROOT / "tests/fixtures/fault_server.py"
CALLS = 10
SLEEP = 0.5
PARALLEL = f"parallel([lambda i=i: fx.sleep(seconds={SLEEP}, tag=str(i)) for i in range({CALLS})])"
SEQUENTIAL = f"[fx.sleep(seconds={SLEEP}, tag=str(i)) for i in range({CALLS})]"


async def run() -> list[Row]:
    with tempfile.TemporaryDirectory() as tmp:
        config = Path(tmp) / "onetool.yaml"
        server = {"command": sys.executable, "args": [str(FAULT_SERVER), "ok"]}
        config.write_text(yaml.safe_dump({"servers": {"fx": server}}))
        args = ["serve", "--config", str(config), "--log-level", "WARNING"]
        gateway = StdioServerParameters(command=ONETOOL, args=args)
        async with Client(gateway, read_timeout_seconds=60) as client:
            timings: dict[str, list[float]] = {PARALLEL: [], SEQUENTIAL: []}
            for code, samples in timings.items():
                for _ in range(5 if code == PARALLEL else 1):
                    start = time.perf_counter()
                    result = await client.call_tool("run", {"code": code})
                    samples.append(time.perf_counter() - start)
                    if result.is_error:
                        raise RuntimeError(f"bench run failed: {result.content}")
    return [
        Row("parallel", f"run: parallel() of {CALLS} x sleep {SLEEP} s", median_p90(timings[PARALLEL]), "< 1000 ms"),
        Row("parallel", f"run: the same {CALLS} calls one by one", median_p90(timings[SEQUENTIAL]), "(reference)"),
    ]
