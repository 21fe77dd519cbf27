"""What may become a label value of /metrics, how many a metric keeps, and where a scrape is written (issue 42,
class 1; the payload through a real gateway is in tests/gateway/test_hostile_trust.py)."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import anyio
import pytest
from prometheus_client.core import GaugeMetricFamily, Metric

from onetool import metrics
from onetool.metrics import OVERFLOW, UNKNOWN, SeriesCap
from onetool.serve._metrics import GatewayState, Scrapes
from onetool.text import mcp_name
from sandbox import SandboxLoad
from tests.upstream.conftest import fault, open_pool, wait_for_status


def test_a_metric_keeps_at_most_its_cap_of_label_combinations_and_warns_once(
    log_records: list[dict[str, object]],
) -> None:
    cap = SeriesCap("onetool_test", 2, limit=3)
    kept = [cap("s", f"t{i}") for i in range(3)]
    assert kept == [("s", "t0"), ("s", "t1"), ("s", "t2")]
    assert [cap("s", f"more{i}") for i in range(5)] == [(OVERFLOW, OVERFLOW)] * 5
    assert cap("s", "t1") == ("s", "t1")  # one it has stays its own
    warnings = [r for r in log_records if r["level"] == "WARNING"]
    assert len(warnings) == 1 and "onetool_test" in str(warnings[0]["message"])


def test_a_label_value_is_an_mcp_name_of_at_most_128_characters() -> None:
    cap = SeriesCap("onetool_test_values", 1)
    for value in ("x" * 20_000, "esc\x1b]52;c;eA==\x07", 'quote"\n', "", "\u202e"):
        (shown,) = cap(value)
        assert shown == mcp_name(value) and 0 < len(shown) <= 128 and shown.isascii() and shown.isprintable()
    assert cap("get_current_time") == ("get_current_time",)


@pytest.mark.anyio
async def test_only_a_configured_server_and_a_name_of_its_catalogue_are_labels() -> None:
    async with open_pool({"fx": fault(), "off": fault(enabled=False)}) as pool:
        await wait_for_status(pool, "fx", "connected")
        assert pool.metric_labels("fx", "echo") == ("fx", "echo")
        assert pool.metric_labels("fx", "made-up") == ("fx", UNKNOWN)
        assert pool.metric_labels("off", "echo") == ("off", UNKNOWN)  # it never listed a catalogue
        assert pool.metric_labels("nowhere", "echo") == (UNKNOWN, UNKNOWN)


class _Where:
    """A collector that notes the thread each collect runs in."""

    def __init__(self) -> None:
        self.threads: list[int] = []

    def collect(self) -> Iterator[Metric]:
        self.threads.append(threading.get_ident())
        yield GaugeMetricFamily("onetool_test_where", "where a scrape was written", 1)


@pytest.mark.anyio
async def test_a_scrape_is_written_off_the_event_loop_once_for_the_scrapes_that_came_meanwhile() -> None:
    loop_thread = threading.get_ident()
    read_on: list[int] = []

    def servers() -> list[object]:
        read_on.append(threading.get_ident())
        return []

    load = SandboxLoad(computing=0, holding_workers=0, waiting=0, processes=0, max_concurrent_runs=1, max_workers=1)
    where = _Where()
    metrics.REGISTRY.register(where)
    where.threads.clear()  # the registry described it by collecting it once
    try:
        scrapes = Scrapes(GatewayState(servers, lambda: load))  # type: ignore[arg-type]
        texts: list[bytes] = []

        async def one() -> None:
            texts.append(await scrapes.text())

        async with anyio.create_task_group() as tg:
            for _ in range(5):
                tg.start_soon(one)
    finally:
        metrics.REGISTRY.unregister(where)
    assert read_on and set(read_on) == {loop_thread}  # the gateway's state: read on the loop
    assert where.threads and loop_thread not in where.threads  # the text: written in a worker thread
    assert len(where.threads) <= 2 < len(texts)  # the five that came together shared the scrapes made for them
    assert all(b"onetool_test_where 1.0" in text for text in texts)
