"""Through a real MCP client against `onetool serve`: progress and upstream logs during a run, parallel pack
calls, and the gateway's own instructions, in both protocol eras."""

from __future__ import annotations

import time
from typing import Any

import anyio
import pytest
from mcp import Client, types

from onetool.serve.run import INSTRUCTIONS
from tests.gateways import ServedGateway, text_of

# logging/setLevel, which a handshake-era client still sends, is deprecated at 2026-07-28.
pytestmark = [pytest.mark.anyio, pytest.mark.filterwarnings("ignore::mcp.MCPDeprecationWarning")]

MODES = ["auto", "legacy"]

LOGGING_SNIPPET = (
    "brave.toggle_simulated_logging()\n"  # server-everything logs one message at once, then one every 5 s
    "brave.trigger_long_running_operation(duration=0.5, steps=1)\n"
    "brave.toggle_simulated_logging()\n"
    "'ok'"
)


class Seen:
    """What a client received besides the result."""

    def __init__(self) -> None:
        self.progress: list[tuple[float, float | None, str | None]] = []
        self.logs: list[types.LoggingMessageNotificationParams] = []
        self.progress_notifications = 0
        """Every notifications/progress on the connection, whether or not a callback was registered for it."""

    async def on_progress(self, progress: float, total: float | None, message: str | None) -> None:
        self.progress.append((progress, total, message))

    async def on_log(self, params: types.LoggingMessageNotificationParams) -> None:
        self.logs.append(params)

    async def on_message(self, message: Any) -> None:
        if isinstance(message, types.ProgressNotification):
            self.progress_notifications += 1


async def call_run(
    gateway: ServedGateway,
    code: str,
    mode: str,
    *,
    progress: bool = True,
    log_level: types.LoggingLevel | None = None,
    wait_for_logs: bool = False,
) -> tuple[types.CallToolResult, Seen]:
    seen = Seen()
    async with Client(
        gateway.url,
        mode=mode,  # type: ignore[arg-type]
        read_timeout_seconds=60,
        logging_callback=seen.on_log,
        message_handler=seen.on_message,
        log_level=log_level,  # the 2026 era's per-request opt-in; no effect on a handshake-era connection
    ) as client:
        if log_level is not None and mode == "legacy":
            await client.set_logging_level(log_level)
        result = await client.call_tool("run", {"code": code}, progress_callback=seen.on_progress if progress else None)
        # Notifications are handled in tasks of their own; they were sent before the result.
        with anyio.move_on_after(5 if wait_for_logs else 0.3):
            while not (wait_for_logs and seen.logs):
                await anyio.sleep(0.05)
    return result, seen


@pytest.mark.parametrize("mode", MODES)
async def test_upstream_progress_is_forwarded_with_server_and_tool(gateway: ServedGateway, mode: str) -> None:
    result, seen = await call_run(gateway, "brave.trigger_long_running_operation(duration=1, steps=4)", mode)
    assert not result.is_error, text_of(result)
    messages = [m for _, _, m in seen.progress]
    assert len(messages) >= 3, seen.progress
    assert messages[0] is not None and messages[0].startswith("brave.trigger_long_running_operation: 1/4"), messages
    values = [p for p, _, _ in seen.progress]
    assert values == sorted(values) and len(set(values)) == len(values), values


@pytest.mark.parametrize("mode", MODES)
async def test_snippet_progress_reaches_the_client_as_one_line(gateway: ServedGateway, mode: str) -> None:
    code = "for i in range(3):\n    progress(i + 1, 3, 'step\\n' + str(i + 1))\n    fx.sleep(seconds=0.1)\n'done'"
    result, seen = await call_run(gateway, code, mode)
    assert result.structured_content == {"result": "done"}, text_of(result)
    assert seen.progress == [(1.0, 3.0, "step 1"), (2.0, 3.0, "step 2"), (3.0, 3.0, "step 3")]
    assert seen.progress_notifications == 3  # what the no-token test below counts on


@pytest.mark.parametrize("mode", MODES)
async def test_the_last_step_arrives_however_fast_the_steps_come(gateway: ServedGateway, mode: str) -> None:
    # Twenty steps at once: the rate lets a few through, and the last one is never among those it holds back.
    result, seen = await call_run(gateway, "for i in range(20):\n    progress(i + 1, 20)\n'done'", mode)
    assert result.structured_content == {"result": "done"}, text_of(result)
    assert 1 < len(seen.progress) < 20, seen.progress
    assert seen.progress[-1] == (20, 20, None)
    assert all(total == 20 and progress == int(progress) for progress, total, _ in seen.progress), seen.progress


@pytest.mark.parametrize("mode", MODES)
async def test_a_report_that_would_not_increase_progress_is_dropped_not_nudged(
    gateway: ServedGateway, mode: str
) -> None:
    # The upstream's own 1/2 and 2/2 come after the snippet said 5 of 10: they would go backwards.
    upstream = "brave.trigger_long_running_operation(duration=0.4, steps=2)"
    code = f"progress(5, 10)\n{upstream}\nprogress(5, 10)\nprogress(10, 10)"
    result, seen = await call_run(gateway, code, mode)
    assert not result.is_error, text_of(result)
    assert [(p, t) for p, t, _ in seen.progress] == [(5, 10), (10, 10)]


async def test_without_a_progress_token_nothing_is_sent_and_the_run_works(gateway: ServedGateway) -> None:
    code = "progress(1, 2, 'half')\nbrave.trigger_long_running_operation(duration=0.3, steps=2)\nprogress(2, 2)\n7"
    result, seen = await call_run(gateway, code, "legacy", progress=False)
    assert result.structured_content == {"result": 7}, text_of(result)
    assert seen.progress_notifications == 0


@pytest.mark.parametrize("mode", MODES)
async def test_upstream_logs_reach_the_client_tagged_with_the_server(gateway: ServedGateway, mode: str) -> None:
    result, seen = await call_run(gateway, LOGGING_SNIPPET, mode, log_level="debug", wait_for_logs=True)
    assert not result.is_error, text_of(result)
    assert seen.logs, "no log message forwarded"
    for log in seen.logs:
        assert log.logger == "brave"
        assert isinstance(log.data, str) and log.data.startswith("brave: ") and "\n" not in log.data


async def test_a_2026_client_that_did_not_opt_in_gets_no_logs(gateway: ServedGateway) -> None:
    result, seen = await call_run(gateway, LOGGING_SNIPPET, "auto")
    assert not result.is_error, text_of(result)
    assert seen.logs == []


async def test_a_handshake_client_gets_warnings_and_above_by_default(gateway: ServedGateway) -> None:
    low = {"debug", "info", "notice"}
    arrived = []
    for _ in range(12):  # server-everything picks each message's level at random: 3 in 8 are below warning
        result, seen = await call_run(gateway, LOGGING_SNIPPET, "legacy")
        assert not result.is_error, text_of(result)
        assert not [log for log in seen.logs if log.level in low], seen.logs
        arrived += seen.logs
        if arrived:
            break
    assert arrived, "no warning or above reached the client in 12 runs"


@pytest.mark.parametrize("mode", MODES)
async def test_parallel_calls_overlap_and_keep_their_order(gateway: ServedGateway, mode: str) -> None:
    code = "parallel([lambda i=i: fx.sleep(seconds=0.5 + i / 100) for i in range(10)])"
    started = time.monotonic()
    result, _ = await call_run(gateway, code, mode)
    elapsed = time.monotonic() - started
    assert result.structured_content == {"result": [f"slept {0.5 + i / 100}" for i in range(10)]}, text_of(result)
    # One after another they take 5.45 s; overlapping, about 0.6 s on a quiet machine (a busy CI one took 2.6 s).
    assert elapsed < 5.0, f"10 x 0.5 s in parallel took {elapsed:.2f} s"


async def test_parallel_with_one_failure(gateway: ServedGateway) -> None:
    calls = "lambda: fx.sleep(seconds=0.2), lambda: fx.fail(message='nope'), lambda: brave.get_sum(a=1, b=2)"
    raised = await call_run(gateway, f"parallel({calls})", "auto")
    assert raised[0].is_error and "ToolError" in text_of(raised[0]) and "nope" in text_of(raised[0])

    code = f"r = parallel({calls}, return_exceptions=True)\n[r[0], isinstance(r[1], ToolError), str(r[1]), r[2]]"
    result, _ = await call_run(gateway, code, "auto")
    assert result.structured_content is not None and not result.is_error, text_of(result)
    first, is_tool_error, message, total = result.structured_content["result"]
    assert (first, is_tool_error, total) == ("slept 0.2", True, "The sum of 1 and 2 is 3.")
    assert "nope" in message


@pytest.mark.parametrize("mode", MODES)
async def test_initialize_carries_the_gateway_instructions(gateway: ServedGateway, mode: str) -> None:
    async with Client(gateway.url, mode=mode) as client:  # type: ignore[arg-type]
        instructions: Any = client.instructions
    assert instructions == INSTRUCTIONS
    assert len(INSTRUCTIONS) < 600 and "run" in INSTRUCTIONS and "parallel(" in INSTRUCTIONS
