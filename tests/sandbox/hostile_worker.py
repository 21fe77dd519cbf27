"""Drive a worker as if its language layer were bypassed: unrestricted code in a real confined worker
writes raw frames on its own channel, and the host must turn whatever arrives into safe data."""

from __future__ import annotations

import contextlib
import dataclasses
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from unittest import mock

from sandbox import Limits, RunResult, Sandbox
from sandbox.host import forkserver

# The snippet finds its channel among the worker's live objects and writes frames of its choosing. After
# its last frame it blocks on the channel until the host, done with the run, kills the worker.
PRELUDE = """
import gc, os, struct
channel = next(o for o in gc.get_objects() if type(o).__name__ == "FdChannel")

def send(body):
    data = struct.pack(">I", len(body)) + body
    while data:
        data = data[os.write(channel.write_fd, data):]

def done(value_json, output=b'""', error=b"null"):
    send(b'{"op":"done","value":' + value_json + b',"output":' + output + b',"error":' + error + b'}')

def call(pack, tool, args=b"[]", kwargs=b"{}"):
    send(b'{"op":"call","pack":' + pack + b',"tool":' + tool + b',"args":' + args + b',"kwargs":' + kwargs + b'}')

def hang():
    os.read(channel.read_fd, 1)
"""


_ROOT = str(Path(__file__).resolve().parents[2])
_HOSTILE_BOOTSTRAP = forkserver._BOOTSTRAP.replace(
    "from sandbox.worker.zygote import main\n",
    f"sys.path.insert(0, {_ROOT!r})\nimport tests.sandbox.hostile_zygote\nfrom sandbox.worker.zygote import main\n",
)
assert _HOSTILE_BOOTSTRAP != forkserver._BOOTSTRAP


@contextlib.asynccontextmanager
async def hostile_sandbox(limits: Limits = Limits(timeout=5.0), **kw: Any) -> AsyncIterator[Sandbox]:  # noqa: B008
    """A Sandbox whose workers run plain Python (tests/sandbox/hostile_zygote.py): the real host, the real
    confined workers and channel, and snippets that can write anything on it."""
    with mock.patch.object(forkserver, "_BOOTSTRAP", _HOSTILE_BOOTSTRAP):
        async with Sandbox(limits, **kw) as box:
            yield box


async def run_hostile(box: Sandbox, body: str, **kw: Any) -> RunResult:
    """`body` uses send/done/call/hang from PRELUDE; the worker's own frames never follow its last one.

    `box` comes from hostile_sandbox()."""
    code = PRELUDE + body + "\nhang()\n"
    kw.setdefault("packs", {"demo": ["echo"]})
    kw.setdefault("on_call", _echo)
    return await box.run(code, **kw)


async def _echo(pack: str, tool: str, args: list[Any], kwargs: dict[str, Any]) -> Any:
    return {"args": args, "kwargs": kwargs}


def assert_json_safe(result: RunResult) -> None:
    """What the gateway writes to an MCP client: strict JSON in UTF-8, no surrogate, no NaN."""
    json.dumps(dataclasses.asdict(result), allow_nan=False, ensure_ascii=False).encode("utf-8")
