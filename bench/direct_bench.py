"""/mcp/direct: tools/list with 200 upstream tools, a direct call vs the upstream itself, list_changed delay.

A real `onetool serve --http` with the direct endpoint on, serving the catalogue fixture (200 realistic tools)
and the fault fixture (to change a catalogue); clients of both eras.
"""

from __future__ import annotations

import contextlib
import os
import statistics
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import yaml
from mcp import Client, StdioServerParameters, stdio_client

from bench import Row, median_p90, ms, serving
from onetool.config import Config
from onetool.core.gateway import Gateway
from onetool.serve.direct import DirectFace
from onetool.state.paths import ENV_RUNTIME_DIR, ENV_STATE_DIR

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests/fixtures"
ONETOOL = str(Path(sys.executable).with_name("onetool"))
CATALOGUE = {"command": sys.executable, "args": [str(FIXTURES / "catalogue_server.py"), "200"]}
FAULT = {"command": sys.executable, "args": [str(FIXTURES / "fault_server.py"), "ok"]}
TOOL, ARGS = "notion_search", {"query": "roadmap"}
LISTS, CALLS, CHANGES, CONNECTS = 50, 500, 10, 20


@contextlib.contextmanager
def _gateway(folder: Path) -> Iterator[str]:
    """`onetool serve --http` with /mcp/direct on; yields the direct URL."""
    config = folder / "onetool.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "http": {"enable_direct_endpoint": True, "ready_requires_servers": "all"},
                "servers": {"cat": CATALOGUE, "fx": FAULT},
            }
        )
    )
    command = [ONETOOL, "serve", "--http", "--port", "0", "--config", str(config), "--log-level", "WARNING"]
    # The bench gateway leaves the user's state store and discovery file alone.
    env = {**os.environ, ENV_STATE_DIR: str(folder / "state"), ENV_RUNTIME_DIR: str(folder / "run")}
    with serving(command, env) as url:
        _wait_ready(url.removesuffix("/mcp") + "/ready")  # the front serves at once; the servers connect behind it
        yield url + "/direct"


def _wait_ready(url: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(url, timeout=5):
                return
        except urllib.error.HTTPError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


async def _timed(n: int, fn: Callable[[], Awaitable[object]]) -> list[float]:
    samples = []
    for _ in range(n):
        start = time.perf_counter()
        await fn()
        samples.append(time.perf_counter() - start)
    return samples


@contextlib.asynccontextmanager
async def _upstream() -> AsyncIterator[Client]:
    params = StdioServerParameters(command=CATALOGUE["command"], args=CATALOGUE["args"])
    with open(os.devnull, "w") as devnull:
        async with Client(stdio_client(params, errlog=devnull), mode="legacy", read_timeout_seconds=30) as client:
            yield client


async def _lists(url: str) -> list[Row]:
    rows = []
    for mode in ("legacy", "auto"):
        async with Client(url, mode=mode, read_timeout_seconds=30) as client:  # type: ignore[arg-type]
            count = len((await client.list_tools()).tools)
            samples = await _timed(LISTS, client.list_tools)
        rows.append(Row("direct", f"tools/list, {count} tools ({mode} client, HTTP)", median_p90(samples)))
    async with _upstream() as upstream:
        samples = await _timed(LISTS, upstream.list_tools)
    rows.append(Row("direct", "tools/list on the upstream itself, 200 tools (stdio)", median_p90(samples)))
    return rows


async def _connect_and_list(url: str) -> list[Row]:
    """SC-001: from a new client's first request to the complete tool list in its hands."""
    samples = []
    for _ in range(CONNECTS):
        start = time.perf_counter()
        async with Client(url, mode="auto", read_timeout_seconds=30) as client:  # type: ignore[arg-type]
            tools = (await client.list_tools()).tools
            samples.append(time.perf_counter() - start)
    measure = f"a new client: connect and the complete tool list ({len(tools)} tools, HTTP)"
    return [Row("direct", measure, median_p90(samples), "< 500 ms")]


async def _calls(url: str) -> list[Row]:
    direct: list[float] = []
    bare: list[float] = []
    async with Client(url, mode="legacy", read_timeout_seconds=30) as client:
        await _timed(50, lambda: client.call_tool(f"cat:{TOOL}", ARGS))  # warm-up
        # Interleaved, so the load of a shared machine weighs on both alike. The unknown tool is the same round
        # trip with no upstream behind it: what the HTTP transport and the SDK cost alone.
        for _ in range(CALLS):
            direct += await _timed(1, lambda: client.call_tool(f"cat:{TOOL}", ARGS))
            bare += await _timed(1, lambda: client.call_tool("no-such-tool", {}))
    async with _upstream() as upstream:
        await _timed(50, lambda: upstream.call_tool(TOOL, ARGS))
        itself = await _timed(CALLS, lambda: upstream.call_tool(TOOL, ARGS))
    routed = statistics.median(direct) - statistics.median(bare)
    return [
        Row("direct", f"call cat:{TOOL} on /mcp/direct (HTTP)", median_p90(direct)),
        Row("direct", "an unknown tool on /mcp/direct (no upstream call)", median_p90(bare)),
        Row("direct", f"call {TOOL} on the upstream itself (stdio)", median_p90(itself)),
        Row("direct", "routing, validation and the upstream call (difference of medians)", ms(routed)),
    ]


async def _in_process() -> list[Row]:
    """The face's own share of a call: DirectFace.call_tool vs the pool call it makes, in one process."""
    config = Config.model_validate({"servers": {"cat": CATALOGUE}})
    face_samples: list[float] = []
    pool_samples: list[float] = []
    async with Gateway(config, warm_workers=1) as gateway:
        face = DirectFace(gateway, ":", "propose", "all")
        await _timed(50, lambda: face.call(f"cat:{TOOL}", ARGS, None))
        for _ in range(CALLS):
            face_samples += await _timed(1, lambda: face.call(f"cat:{TOOL}", ARGS, None))
            pool_samples += await _timed(1, lambda: gateway.pool.call("cat", TOOL, ARGS))
    share = statistics.median(face_samples) - statistics.median(pool_samples)
    return [Row("direct", "the face's own share of a call (lookup, validation), in-process", ms(share))]


async def _list_changed(url: str) -> list[Row]:
    """An upstream adds a tool: time from the call until a direct client hears tools/list_changed."""
    heard = anyio.Event()

    async def on_message(message: Any) -> None:
        if getattr(message, "method", "") == "notifications/tools/list_changed":
            heard.set()

    samples = []
    async with Client(url, mode="legacy", message_handler=on_message, read_timeout_seconds=30) as client:
        for i in range(CHANGES):
            heard = anyio.Event()
            start = time.perf_counter()
            await client.call_tool("fx:add_tool", {"name": f"extra_{i}"})
            with anyio.fail_after(10):
                await heard.wait()
            samples.append(time.perf_counter() - start)
            await anyio.sleep(0.2)  # apart, as real changes are
    return [Row("direct", "upstream tool added -> list_changed on /mcp/direct", median_p90(samples), "< 1 s")]


async def run() -> list[Row]:
    with tempfile.TemporaryDirectory() as tmp, _gateway(Path(tmp)) as url:
        rows = [*await _lists(url), *await _connect_and_list(url), *await _calls(url), *await _list_changed(url)]
    return [*rows, *await _in_process()]
