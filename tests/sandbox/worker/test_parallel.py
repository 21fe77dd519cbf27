"""parallel(): pack calls of one snippet in flight together, results in order, within every run limit; and the
host's check of the call ids a worker sends."""

from __future__ import annotations

import time
from typing import Any

import anyio
import pytest

from sandbox import Limits, RunResult, Sandbox, ToolError
from sandbox.protocol.caps import MAX_IN_FLIGHT
from tests.sandbox.hostile_worker import run_hostile

pytestmark = pytest.mark.anyio

PACKS = {"demo": ["sleep", "echo", "fail"]}


class Upstream:
    """An on_call whose `sleep` takes its time: it records how many calls overlapped, which ended, which were
    cancelled."""

    def __init__(self) -> None:
        self.running = 0
        self.most = 0
        self.calls = 0
        self.finished: list[Any] = []
        self.cancelled = 0

    async def __call__(self, pack: str, tool: str, args: list[Any], kwargs: dict[str, Any]) -> Any:
        self.calls += 1
        if tool == "fail":
            raise ToolError("failed on purpose")
        if tool == "echo":
            return args
        self.running += 1
        self.most = max(self.most, self.running)
        try:
            await anyio.sleep(args[0])
        except anyio.get_cancelled_exc_class():
            self.cancelled += 1
            raise
        finally:
            self.running -= 1
        self.finished.append(args[1])
        return args[1]


async def run(sandbox: Sandbox, code: str, upstream: Upstream, **limits: Any) -> RunResult:
    return await sandbox.run(code, packs=PACKS, on_call=upstream, limits=Limits(**{"timeout": 5.0, **limits}))


async def test_calls_overlap_and_results_keep_their_order(sandbox: Sandbox) -> None:
    upstream = Upstream()
    started = time.monotonic()
    # The later items finish first: the order of the results is the order of the items, not of completion.
    result = await run(sandbox, "parallel([lambda i=i: demo.sleep(0.5 - i / 50, i) for i in range(10)])", upstream)
    assert result.value == list(range(10)), result.error
    assert time.monotonic() - started < 2.5
    assert upstream.most == 10 and upstream.finished != list(range(10))


async def test_the_in_flight_cap_holds_and_every_call_is_made(sandbox: Sandbox) -> None:
    upstream = Upstream()
    result = await run(sandbox, "parallel(*[lambda i=i: demo.sleep(0.05, i) for i in range(40)])", upstream)
    assert result.value == list(range(40)), result.error
    assert upstream.most == MAX_IN_FLIGHT and result.calls == 40


async def test_one_failure_is_raised_after_the_others_finished(sandbox: Sandbox) -> None:
    upstream = Upstream()
    code = (
        "try:\n    parallel(lambda: demo.sleep(0.3, 'slow'), lambda: demo.fail(), lambda: demo.echo(1))\n"
        "except ToolError as e:\n    caught = str(e)\ncaught"
    )
    result = await run(sandbox, code, upstream)
    assert result.value == "failed on purpose", result.error
    assert upstream.finished == ["slow"] and upstream.cancelled == 0


async def test_return_exceptions_gives_failures_as_values(sandbox: Sandbox) -> None:
    code = (
        "r = parallel(lambda: demo.echo(1), lambda: demo.fail(), return_exceptions=True)\n"
        "[r[0], isinstance(r[1], ToolError), str(r[1])]"
    )
    result = await run(sandbox, code, Upstream())
    assert result.value == [[1], True, "failed on purpose"], result.error


async def test_max_calls_is_checked_before_a_batch_is_sent(sandbox: Sandbox) -> None:
    upstream = Upstream()
    # Caught or not, the LimitError ends the run; and none of the batch was sent.
    code = "demo.echo(0)\ntry:\n    parallel([lambda i=i: demo.echo(i) for i in range(5)])\nexcept LimitError:\n    1"
    result = await run(sandbox, code, upstream, max_calls=5)
    assert result.error is not None and result.error.type == "LimitError", result
    assert "sandbox.max_calls" in result.error.message
    assert upstream.calls == 1


async def test_the_run_timeout_cancels_every_call_in_flight(sandbox: Sandbox) -> None:
    upstream = Upstream()
    started = time.monotonic()
    result = await run(sandbox, "parallel([lambda i=i: demo.sleep(60, i) for i in range(20)])", upstream, timeout=1.0)
    assert result.error is not None and result.error.type == "TimeoutError", result
    assert time.monotonic() - started < 5
    assert upstream.cancelled == MAX_IN_FLIGHT and upstream.running == 0


@pytest.mark.parametrize(
    ("code", "message"),
    [
        ("parallel([lambda: demo.echo(u) for u in range(3)])", "loop variable's last value"),
        ("parallel(lambda: demo.echo(1), 5)", "item 1 is a int"),
        ("parallel(lambda: [demo.echo(1), demo.echo(2)])", "item 0 made 2 pack calls"),
        ("parallel(lambda: 1)", "item 0 made 0 pack calls"),
        ("parallel(lambda: demo.echo(1)[0])", "has no result yet"),
        ("parallel(lambda: parallel(lambda: demo.echo(1)))", "cannot be used inside parallel()"),
    ],
    ids=["late-binding", "not-callable", "two-calls", "no-call", "result-used", "nested"],
)
async def test_mistakes_are_refused_before_any_call_is_made(sandbox: Sandbox, code: str, message: str) -> None:
    upstream = Upstream()
    result = await run(sandbox, code, upstream)
    assert result.error is not None and result.error.type == "TypeError", result
    assert message in result.error.message
    assert upstream.calls == 0


async def test_a_tool_stub_is_a_callable_too(sandbox: Sandbox) -> None:
    result = await run(sandbox, "parallel(demo.echo, lambda: demo.echo(2))", Upstream())
    assert result.value == [[], [2]], result.error


# What a worker past the language layer may send: the host checks every call id.


@pytest.mark.parametrize(
    "call_id",
    [b"-1", b"true", b'"7"', b"1.5", b"2147483648"],
    ids=["negative", "bool", "string", "float", "too-big"],
)
async def test_a_call_id_that_is_no_id_breaks_the_protocol(hostile: Sandbox, call_id: bytes) -> None:
    frame = b'{"op":"call","id":' + call_id + b',"pack":"demo","tool":"echo","args":[],"kwargs":{}}'
    result = await run_hostile(hostile, f"send({frame!r})")
    assert result.error is not None and result.error.type == "WorkerCrashed", result
    assert "not a call message" in result.error.message


async def test_a_call_id_reused_while_in_flight_breaks_the_protocol(hostile: Sandbox) -> None:
    frame = '{"op":"call","id":3,"pack":"demo","tool":"sleep","args":[1, 0],"kwargs":{}}'
    result = await run_hostile(hostile, f"send({frame.encode()!r})\nsend({frame.encode()!r})", on_call=Upstream())
    assert result.error is not None and result.error.type == "WorkerCrashed", result
    assert "call id 3 is already waiting" in result.error.message


async def test_replies_carry_the_call_id(hostile: Sandbox) -> None:
    body = (
        'send(b\'{"op":"call","id":41,"pack":"demo","tool":"echo","args":[1],"kwargs":{}}\')\n'
        "import json\ndone(json.dumps(channel.receive()).encode())"
    )
    result = await run_hostile(hostile, body, on_call=Upstream())
    assert result.value == {"value": [1], "id": 41}, result
