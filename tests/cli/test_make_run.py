"""`make run` (the README's first command) serves the example config."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

import pytest
from mcp import Client

from tests.gateways import text_of

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parents[2]


async def test_make_run_serves_the_example_config() -> None:
    proc = subprocess.Popen(
        ["make", "-s", "run", "PORT=0"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        start_new_session=True,
    )
    try:
        assert proc.stdout is not None
        url = next(line.strip() for line in proc.stdout if line.startswith("http://"))
        async with Client(url) as client:
            # The front serves at once and the servers connect behind it: a call waits for its server's connect.
            first = await client.call_tool("run", {"code": "time.get_current_time(timezone='UTC')['timezone']"})
            assert text_of(first) == "UTC"
            description = (await client.list_tools()).tools[0].description or ""
            assert "\ntime:\n  get_current_time(timezone)" in description
            assert "\ntext:\n  slugify(title, max_length?)" in description
            result = await client.call_tool("run", {"code": "text.slugify('Hello, OneTool!')"})
            assert text_of(result) == "hello-onetool"
            servers = await client.call_tool("run", {"code": "sorted(s['status'] for s in proxy.list_servers())"})
            assert servers.structured_content["result"] == ["connected", "connected"]
        # Ctrl-C as a user would, but to onetool alone: make reports its child's exit status.
        children = subprocess.run(["pgrep", "-P", str(proc.pid)], capture_output=True, text=True).stdout.split()
        for pid in children:
            os.kill(int(pid), signal.SIGINT)
        assert proc.wait(15) == 0
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        assert proc.stdout is not None
        proc.stdout.close()
