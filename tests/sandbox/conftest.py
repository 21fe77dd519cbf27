"""A Sandbox per test, a host-side secret the snippets must never see, and an echo on_call."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from sandbox import Limits, Sandbox, ToolError

ENV_CANARY = "ONETOOL_SANDBOX_CANARY"
ENV_SECRET = "env-canary-7f3a9c"
HOST_SECRET = "closure-canary-51be02"
HOSTNAME = Path("/etc/hostname").read_text().strip() if Path("/etc/hostname").exists() else ""
FORBIDDEN_TEXT = [ENV_SECRET, HOST_SECRET, "root:x:0:0", *([HOSTNAME] if len(HOSTNAME) >= 4 else [])]


def make_on_call() -> Any:
    secret = {"token": HOST_SECRET}

    async def on_call(pack: str, tool: str, args: list[Any], kwargs: dict[str, Any]) -> Any:
        if tool == "fail":
            raise ToolError(f"{pack}.{tool} failed on purpose")
        if tool == "boom":
            raise RuntimeError("upstream exploded")
        if tool not in ("echo", "image") or not secret:
            raise ToolError(f"unknown tool {pack}.{tool}; did you mean echo?")
        if tool == "image":
            return {"type": "image", "data": "aGVsbG8=", "mimeType": "image/png"}
        return {"args": args, "kwargs": kwargs}

    return on_call


PACKS = {"demo": ["echo", "fail", "boom", "image"]}


@pytest.fixture(autouse=True)
def env_canary(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV_CANARY, ENV_SECRET)
    assert os.environ[ENV_CANARY] == ENV_SECRET


@pytest.fixture
async def sandbox() -> AsyncIterator[Sandbox]:
    async with Sandbox(Limits(timeout=5.0), warm=1) as box:
        yield box


def assert_no_leak(*texts: Any) -> None:
    blob = " ".join(repr(t) for t in texts)
    for secret in FORBIDDEN_TEXT:
        assert secret not in blob, f"leaked {secret!r}: {blob[:500]}"


@pytest.fixture
async def hostile() -> AsyncIterator[Sandbox]:
    """A Sandbox whose workers run unrestricted code, as if the language layer were bypassed."""
    from tests.sandbox.hostile_worker import hostile_sandbox

    async with hostile_sandbox(warm=1) as box:
        yield box
