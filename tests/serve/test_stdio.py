"""stdio: both eras, list_changed, EOF ends the process, stdout carries only JSON-RPC."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from mcp import Client, StdioServerParameters

from tests.serve.fake_gateway import INITIALIZE

REPO = Path(__file__).resolve().parents[2]
APP = [sys.executable, "-m", "tests.serve.stdio_app"]
PARAMS = StdioServerParameters(command=APP[0], args=APP[1:], cwd=str(REPO))
LIST_CHANGED = "notifications/tools/list_changed"


@pytest.mark.parametrize(("mode", "version"), [("auto", "2026-07-28"), ("legacy", "2025-11-25")])
async def test_both_eras_list_and_call(mode: str, version: str) -> None:
    async with Client(PARAMS, mode=mode, read_timeout_seconds=20) as client:
        assert client.protocol_version == version
        tools = (await client.list_tools()).tools
        assert [(t.name, t.description) for t in tools] == [("run", "Run Python code. Catalogue v1.")]
        result = await client.call_tool("run", {"code": "x = 1"})
        assert (result.content[0].text, result.structured_content, result.is_error) == (
            "echo: x = 1",
            {"result": "x = 1"},
            False,
        )


async def test_list_changed_reaches_a_legacy_client() -> None:
    changed = anyio.Event()

    async def on_message(message: object) -> None:
        if getattr(message, "method", None) == LIST_CHANGED:
            changed.set()

    async with Client(PARAMS, mode="legacy", message_handler=on_message, read_timeout_seconds=20) as client:
        assert client.server_capabilities.tools.list_changed is True
        await client.call_tool("run", {"code": "change"})
        with anyio.fail_after(10):
            await changed.wait()
        assert (await client.list_tools()).tools[0].description == "Run Python code. Catalogue v2."


async def test_list_changed_reaches_a_2026_client() -> None:
    async with Client(PARAMS, read_timeout_seconds=20) as client:
        async with client.listen(tools_list_changed=True) as subscription:
            await client.call_tool("run", {"code": "change"})
            with anyio.fail_after(10):
                async for _event in subscription:
                    break
        assert (await client.list_tools()).tools[0].description == "Run Python code. Catalogue v2."


def send(proc: subprocess.Popen[str], message: dict) -> None:
    assert proc.stdin is not None
    proc.stdin.write(json.dumps(message) + "\n")
    proc.stdin.flush()


def spawn() -> subprocess.Popen[str]:
    return subprocess.Popen(
        APP, cwd=REPO, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def test_eof_exits_zero_and_stdout_is_only_json_rpc() -> None:
    proc = spawn()
    try:
        assert proc.stdout is not None
        send(proc, INITIALIZE)
        first = proc.stdout.readline()
        send(proc, {"jsonrpc": "2.0", "method": "notifications/initialized"})
        send(
            proc,
            {
                "jsonrpc": "2.0",
                "id": 2,
                "method": "tools/call",
                "params": {"name": "run", "arguments": {"code": "1"}},
            },
        )
        second = proc.stdout.readline()
        # communicate() closes stdin: on that EOF the server must finish on its own.
        rest, stderr = proc.communicate(timeout=15)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, stderr
    messages = [json.loads(line) for line in [first, second, *rest.splitlines()] if line.strip()]
    assert all(m["jsonrpc"] == "2.0" for m in messages)
    assert [m.get("id") for m in messages] == [1, 2]
    assert messages[1]["result"]["content"][0]["text"] == "echo: 1"
    # The tool's print happened, and went to stderr instead of the protocol channel.
    assert "stray output from a tool" in stderr
    assert "Traceback" not in stderr


def test_cancel_while_stdin_stays_open_exits_promptly() -> None:
    """Cancellation must not wait for a stdin read: the client here never closes stdin."""
    proc = spawn()
    try:
        assert proc.stdout is not None
        send(proc, INITIALIZE)
        assert json.loads(proc.stdout.readline())["id"] == 1
        proc.send_signal(signal.SIGTERM)
        returncode = proc.wait(timeout=10)
        stderr = proc.stderr.read() if proc.stderr else ""
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for pipe in (proc.stdin, proc.stdout, proc.stderr):
            if pipe:
                pipe.close()
    assert returncode == 0, stderr
    assert "Traceback" not in stderr


@pytest.mark.parametrize("source", ["/dev/null", "file"])
def test_stdin_that_cannot_be_polled_is_read_to_its_end(source: str, tmp_path: Path) -> None:
    """The null device and a file cannot be watched with epoll; each is read as it is, to the end."""
    path = tmp_path / "requests.jsonl"
    path.write_text(json.dumps(INITIALIZE) + "\n")
    with open("/dev/null" if source == "/dev/null" else path, "rb") as stdin:
        done = subprocess.run(APP, stdin=stdin, capture_output=True, text=True, cwd=REPO, timeout=15)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    answers = [json.loads(line) for line in done.stdout.splitlines()]
    assert [a["id"] for a in answers] == ([] if source == "/dev/null" else [1])
