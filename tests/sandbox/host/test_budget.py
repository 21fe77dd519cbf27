"""The host's memory for run traffic: a frame is decoded only once its run has reserved what its objects may
take, runs wait for each other rather than grow the gateway, and everything reserved is given back."""

from __future__ import annotations

import tracemalloc
from functools import partial
from typing import Any

import anyio
import pytest

from sandbox import Limits
from sandbox.host._untrusted import MAX_NESTING, decode_untrusted
from sandbox.host.budget import RESERVED_FROM, decoded_size
from sandbox.protocol.channel import ProtocolError
from tests.sandbox.hostile_worker import hostile_sandbox, run_hostile

pytestmark = pytest.mark.anyio

DICTS = 120_000
"""Empty dicts in one call's arguments: a 360 KB frame, about 11 MB of heap once decoded."""
CALL_OF_DICTS = f"call(b'\"demo\"', b'\"echo\"', args=b'[' + b','.join([b'{{}}'] * {DICTS}) + b']')\n"


@pytest.mark.parametrize(
    "body",
    [
        b"[" + b",".join([b"{}"] * 100_000) + b"]",
        b"[" + b",".join([b"[]"] * 100_000) + b"]",
        b"[" + b",".join([b'"%d"' % i for i in range(100_000)]) + b"]",
        b'{"k": [' + b",".join([b"%d.5" % i for i in range(100_000)]) + b"]}",
        b"{" + b",".join([b'"k%d": {"a": [1, "x"]}' % i for i in range(30_000)]) + b"}",
    ],
    ids=["dicts", "lists", "strings", "floats", "objects"],
)
def test_the_estimate_is_at_least_what_decoding_takes(body: bytes) -> None:
    tracemalloc.start()
    try:
        value = decode_untrusted(body)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert value
    assert peak <= decoded_size(body), (peak, decoded_size(body))


def test_the_decoder_refuses_nesting_past_its_cap() -> None:
    assert decode_untrusted(b"[" * MAX_NESTING + b"]" * MAX_NESTING)
    with pytest.raises(ProtocolError, match="recursion limit"):
        decode_untrusted(b"[" * (MAX_NESTING + 1) + b"]" * (MAX_NESTING + 1))


async def test_a_frame_that_could_never_fit_ends_its_run() -> None:
    async with hostile_sandbox(Limits(timeout=10.0), host_memory_mb=16) as box:
        body = f"done(b'[' + b','.join([b'{{}}'] * {3 * DICTS}) + b']')"
        result = await run_hostile(box, body)
        assert result.error is not None and result.error.type == "LimitError", result.error
        assert "sandbox.max_host_memory_mb (16 MB)" in result.error.message
        assert box._memory.used == 0


async def test_runs_wait_for_memory_in_turn_and_give_it_back() -> None:
    body = CALL_OF_DICTS + "channel.receive()\ndone(b'1')"
    size = decoded_size(b"[" + b",".join([b"{}"] * DICTS) + b"]")
    assert RESERVED_FROM < 3 * DICTS and 10 * 2**20 < size < 16 * 2**20  # one such call fits, two do not
    async with hostile_sandbox(Limits(timeout=10.0), host_memory_mb=16) as box:
        calls: list[str] = []
        first_may_answer = anyio.Event()

        async def on_call(pack: str, tool: str, args: list[Any], kwargs: dict[str, Any]) -> Any:
            calls.append("call")
            if len(calls) == 1:
                await first_may_answer.wait()
            return None

        results: list[Any] = []

        async def run() -> None:
            results.append(await run_hostile(box, body, on_call=on_call))

        async with anyio.create_task_group() as tg:
            tg.start_soon(run)
            tg.start_soon(run)
            with anyio.fail_after(10):
                while not calls:
                    await anyio.sleep(0.01)
            await anyio.sleep(1.0)  # the second run's call has long arrived: it waits for memory
            assert calls == ["call"] and box._memory.used >= size
            first_may_answer.set()
        assert calls == ["call", "call"]
        assert [r.value for r in results] == [1, 1], [r.error for r in results]
        assert box._memory.used == 0


async def test_a_run_that_waits_for_memory_past_its_deadline_says_so() -> None:
    async with hostile_sandbox(Limits(timeout=2.0), host_memory_mb=16) as box:
        held = anyio.Event()

        async def hold(pack: str, tool: str, args: list[Any], kwargs: dict[str, Any]) -> Any:
            held.set()
            await anyio.sleep(5)

        async with anyio.create_task_group() as tg:
            holder = partial(run_hostile, box, CALL_OF_DICTS + "channel.receive()", on_call=hold, limits=Limits(10.0))
            tg.start_soon(holder)
            await held.wait()
            waiting = await run_hostile(box, CALL_OF_DICTS + "channel.receive()")
            tg.cancel_scope.cancel()
        assert waiting.error is not None and waiting.error.type == "LimitError", waiting.error
        assert "waited until its time limit for gateway memory" in waiting.error.message
        assert box._memory.used == 0
