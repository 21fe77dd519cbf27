"""Finding tools: how well the index ranks real tools for tasks in a user's words, how fast it answers and follows
the catalogue, what it costs in memory, and what a task costs in each face when the model searches first.

- Recall@1, @5 and @10 over the search catalogue (tests/fixtures/search_catalogue.json: 568 tools of 30 real
  servers from npm and PyPI) for the tasks of tests/fixtures/search_tasks.json (a task is found when any of the
  tools that do it is among the first k): by BM25 alone (``search.semantic: off``), by meaning alone (the
  ``semantic`` extra's vectors, cosine only) and both fused (what a gateway with the extra does).
- Speed at 1,000 tools (the catalogue and copies of its servers), BM25 alone and fused: one search of the index
  (p50 / p90 over the tasks); one ``proxy.search`` inside a run, through a real gateway (the run's time over a
  hundred searches); the index's update after one server's catalogue changed.
- Memory of the index at 1,000 tools: the Python objects it made (tracemalloc; the tools' vectors among them)
  and its SQLite database's pages; the model's apart, in a fresh process: its mapped file, the pages of it a
  catalogue and its searches read, and what loading it (numpy, tokenizers, the tokenizer) adds to the RSS.
- Bytes of a task end to end, search then call, through a real in-process gateway serving the 30 recorded servers
  (tests/fixtures/recorded_server.py, real names and schemas): ``run`` (its tool list, a run of proxy.search, a
  run of the call), /mcp/direct with ``direct.expose: search`` (its list, search_tools, call_tool), inspect (its
  list, inspect(query=), exec), against direct exposure (every tool listed, then the call), as the model reads
  them (see tokens_bench).

``python -m bench.search_bench`` prints the table (``--index``: the rows without a gateway, in seconds); ``make
bench`` runs :func:`run` with the others.
"""

from __future__ import annotations

import dataclasses
import gc
import json
import subprocess
import sys
import time
import tracemalloc
from collections.abc import Awaitable, Callable
from contextlib import closing
from typing import TYPE_CHECKING, Any

import anyio
from mcp import Client, types

from bench import Row, median_p90
from bench.tokens_bench import Cost, Transcript, compact_json, entries, measure
from onetool.config import Config, to_identifier
from onetool.core.gateway import Gateway
from onetool.logs import setup_logging
from onetool.registry import Pack, Registry
from onetool.search import ToolIndex, semantic_model
from onetool.serve.direct import build_direct_server
from onetool.serve.inspect import build_inspect_server
from onetool.serve.run import build_run_server
from tests.search_catalogue import FIXTURES, recorded, registry, tasks, tool_count

if TYPE_CHECKING:
    from onetool.search import Model

AT = 1_000
"""Tools in the catalogue the speed and memory rows are measured at."""
SEARCHES_IN_A_RUN = 100
TASKS: list[tuple[str, str, str, dict[str, Any]]] = [
    ("what time is it in Tokyo right now", "time", "get_current_time", {"timezone": "Asia/Tokyo"}),
    (
        "file a ticket in our GitHub repo about the broken login page",
        "github",
        "create_issue",
        {"owner": "acme", "repo": "web", "title": "The login page is broken"},
    ),
    ("post an update to the #general Slack channel", "slack", "slack_post_message", {"channel_id": "C1", "text": "Hi"}),
    (
        "why did my pod crash? show its logs",
        "kubernetes",
        "kubectl_logs",
        {"resourceType": "pod", "name": "web-1", "namespace": "default"},
    ),
    ("how do I drive from Paris to Lyon", "google_maps", "maps_directions", {"origin": "Paris", "destination": "Lyon"}),
]
"""Tasks scripted end to end: the words the model searches with, and the call it then makes."""
SHOWN = 5
"""Results a scripted search asks for."""


def recall_rows() -> list[Row]:
    label = f"{tool_count()} real tools, {len(tasks())} tasks"
    model = semantic_model("auto")
    with closing(ToolIndex()) as index:
        index.update(registry())
        rows = [_recall_row(f"BM25 alone ({label})", [_found(index, case.task) for case in tasks()])]
    if model is None:
        return [*rows, Row("search", "recall by meaning", "the semantic extra is not installed")]
    with closing(ToolIndex(model)) as index:
        index.update(registry())
        fused = [_found(index, case.task) for case in tasks()]
    return [
        *rows,
        _recall_row("by meaning alone (cosine)", _by_meaning(model)),
        _recall_row("BM25 and meaning fused (search.semantic)", fused),
    ]


def _found(index: ToolIndex, task: str) -> list[str]:
    return [hit.tool for hit in index.search(task, 10)]


def _by_meaning(model: Model) -> list[list[str]]:
    """Each task's first ten tools by cosine alone, as the index's vectors rank them."""
    from onetool.search._semantic import Vectors

    vectors = Vectors(model)
    names: dict[int, str] = {}
    for pack in registry().packs.values():
        rows = [(len(names) + i, tool) for i, tool in enumerate(pack.tools.values())]
        names.update((rowid, f"{pack.name}.{tool.name}") for rowid, tool in rows)
        vectors.put(pack.name, rows)
    vectors.stack()
    ranked = []
    for case in tasks():
        cosines = vectors.cosines(case.task)
        ranked.append([names[int(vectors.rowids[i])] for i in cosines.argsort()[::-1][:10]])
    return ranked


def _recall_row(label: str, found: list[list[str]]) -> Row:
    """Recall@1 / @5 / @10 of the tasks' first ten tools ``found``."""
    shares = [
        sum(any(t in got[:k] for t in case.tools) for case, got in zip(tasks(), found, strict=True)) for k in (1, 5, 10)
    ]
    value = " / ".join(f"{n / len(found):.3f}" for n in shares)
    return Row("search", f"recall@1 / @5 / @10, {label}", value, "@5 ≥ 0.9")


def index_rows() -> list[Row]:
    model = semantic_model("auto")
    rows = _index_rows(None, "BM25")
    if model is not None:
        rows += _index_rows(model, "fused") + model_rows()
    return rows


def _index_rows(model: Model | None, ranking: str) -> list[Row]:
    big = registry(at_least=AT)
    tools = sum(len(p.tools) for p in big.packs.values())
    gc.collect()
    tracemalloc.start()
    index = ToolIndex(model)
    started = time.perf_counter()
    index.update(big)
    built = time.perf_counter() - started
    gc.collect()
    objects = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    database = index.database_bytes()
    with closing(index):
        searches = []
        for case in tasks():
            started = time.perf_counter()
            index.search(case.task)
            searches.append(time.perf_counter() - started)
        updates = []
        for i in range(20):  # one server changes a description, back and forth
            packs = dict(big.packs)
            github = packs["github"]
            first = next(iter(github.tools.values()))
            changed = {**github.tools, first.name: _described(first, f"Version {i} of this tool.")}
            packs["github"] = Pack("github", changed, server="github")
            registry_now = Registry(packs, {s.name: s for s in big.servers()})
            started = time.perf_counter()
            index.update(registry_now)
            updates.append(time.perf_counter() - started)
        vectors = index.vector_bytes()
    memory = f"{objects / 2**20:.1f} + {database / 2**20:.1f} MB"
    return [
        Row("search", f"{ranking}: index {tools:,} tools from scratch", f"{built * 1000:.0f} ms"),
        Row("search", f"{ranking}: one search, {tools:,} tools (median / p90)", median_p90(searches), "p50 < 5 ms"),
        Row("search", f"{ranking}: update after one server changed, {tools:,} tools", median_p90(updates), "< 50 ms"),
        Row(
            "search",
            f"{ranking}: memory of the index, {tools:,} tools: its Python objects + its SQLite pages",
            memory + (f" (its vectors {vectors / 2**20:.1f} MB of the objects)" if vectors else ""),
            "< 20 MB",
        ),
    ]


_MODEL_MEMORY = f"""
import json, resource, sys
def rss():
    return int(open("/proc/self/statm").read().split()[1]) * resource.getpagesize()
sys.path.insert(0, {str(FIXTURES.parent.parent)!r})
from tests.search_catalogue import registry, tasks
from onetool.search import ToolIndex, semantic_model
from onetool.search._semantic import WEIGHTS
before = rss()
model = semantic_model("on")
loaded = rss()
index = ToolIndex(model)
index.update(registry(at_least={AT}))
for case in tasks():
    index.search(case.task)
mapped = 0
lines = iter(open("/proc/self/smaps").read().splitlines())
for line in lines:
    if line.rstrip().endswith(WEIGHTS.rsplit("/", 1)[-1]):
        for field in lines:
            if field.startswith("Rss:"):
                mapped += int(field.split()[1]) * 1024
                break
print(json.dumps({{"load": loaded - before, "mapped": model.mapped_bytes(), "resident": mapped}}))
"""


def model_rows() -> list[Row]:
    """The model's memory, in a process of its own (what importing numpy and tokenizers adds is the process's)."""
    done = subprocess.run([sys.executable, "-c", _MODEL_MEMORY], capture_output=True, text=True, check=True)
    figures = json.loads(done.stdout)
    return [
        Row(
            "search",
            f"the model: its file mapped / of it resident after indexing {AT:,} tools and the tasks' searches",
            f"{figures['mapped'] / 2**20:.1f} / {figures['resident'] / 2**20:.1f} MB",
        ),
        Row(
            "search",
            "the model: RSS its loading adds (numpy, tokenizers, the tokenizer)",
            f"{figures['load'] / 2**20:.1f} MB",
        ),
    ]


def _described(tool: Any, description: str) -> Any:
    return dataclasses.replace(tool, description=description)


# ---- through a gateway ---------------------------------------------------------------------------------------


def _servers() -> dict[str, Any]:
    script = str(FIXTURES / "recorded_server.py")
    # Thirty Python servers start at once on the bench machine's cores: each gets the time that takes.
    return {name: {"command": sys.executable, "args": [script, name], "connect_timeout": 180} for name in recorded()}


Call = Callable[[str, dict[str, Any]], Awaitable[types.CallToolResult]]


async def _turn(transcript: Transcript, call: Call, name: str, arguments: dict[str, Any]) -> types.CallToolResult:
    result = await call(name, arguments)
    if result.is_error:
        raise RuntimeError(f"the scripted task failed at {name}: {result.content}")
    transcript.turns.append(({"name": name, "arguments": arguments}, result))
    return result


async def gateway_rows() -> list[Row]:
    config = Config.model_validate({"servers": _servers(), "sandbox": {"max_calls": SEARCHES_IN_A_RUN + 10}})
    rows: list[Row] = []
    async with (
        Gateway(config, warm_workers=1) as gateway,
        Client(build_run_server(gateway)) as run_face,
        Client(build_inspect_server(gateway)) as inspect_face,
        Client(build_direct_server(gateway, expose="search")) as search_face,
    ):
        pool = gateway.pool
        exposure = [
            {**entry, "name": f"{s.name}:{entry['name']}"}
            for s in pool.status()
            for entry in entries(pool.tools(s.name))
        ]
        lists = {
            "run": entries((await run_face.list_tools()).tools),
            "direct, expose: search": entries((await search_face.list_tools()).tools),
            "inspect": entries((await inspect_face.list_tools()).tools),
            "direct exposure": exposure,
        }
        totals: dict[str, Cost] = {face: Cost(0, 0, 0) for face in lists}
        for task, server, tool, arguments in TASKS:
            pack, name = to_identifier(server), to_identifier(tool)
            t = Transcript(lists["run"], [])
            await _turn(t, run_face.call_tool, "run", {"code": f"proxy.search({task!r}, limit={SHOWN})"})
            await _turn(t, run_face.call_tool, "run", {"code": f"{pack}.{name}(**{arguments!r})"})
            totals["run"] += t.cost()
            t = Transcript(lists["direct, expose: search"], [])
            await _turn(t, search_face.call_tool, "search_tools", {"query": task, "limit": SHOWN})
            call = {"name": f"{server}:{tool}", "arguments": arguments}
            await _turn(t, search_face.call_tool, "call_tool", call)
            totals["direct, expose: search"] += t.cost()
            t = Transcript(lists["inspect"], [])
            await _turn(t, inspect_face.call_tool, "inspect", {"query": task, "limit": SHOWN})
            exec_args = {"server_name": server, "tool_name": tool, "arguments": arguments}
            await _turn(t, inspect_face.call_tool, "exec", exec_args)
            totals["inspect"] += t.cost()
            t = Transcript(exposure, [])

            async def direct_call(
                full: str, args: dict[str, Any], server: str = server, tool: str = tool
            ) -> types.CallToolResult:
                return await pool.call(server, tool, args)

            await _turn(t, direct_call, f"{server}:{tool}", arguments)
            totals["direct exposure"] += t.cost()
        tools = len(exposure)
        base = totals["direct exposure"]
        for face, listing in lists.items():
            listed = measure(compact_json(listing))
            size = f"{listed.bytes:,} B / {listed.tokens:,} tok"
            rows.append(Row("search", f"{tools} tools: {face} tool list", size, "< 3,000 B" if face == "run" else ""))
        for face, cost in totals.items():
            share = f"{cost.bytes / base.bytes:.1%} of direct exposure" if face != "direct exposure" else ""
            per_task = f"{cost.bytes // len(TASKS):,} B / {cost.tokens // len(TASKS):,} tok"
            rows.append(Row("search", f"{tools} tools: a task, search then call, in {face}", per_task, share))
        rows.append(await _search_in_a_run(run_face, tools))
    return rows


async def _search_in_a_run(run_face: Client, tools: int) -> Row:
    queries = [case.task for case in tasks()][:SEARCHES_IN_A_RUN]
    code = f"for q in {queries!r}:\n    proxy.search(q)\nlen({queries!r})"
    empty = f"for q in {queries!r}:\n    q.lower()\nlen({queries!r})"
    samples = []
    for _ in range(3):
        started = time.perf_counter()
        await run_face.call_tool("run", {"code": empty})
        base = time.perf_counter() - started
        started = time.perf_counter()
        result = await run_face.call_tool("run", {"code": code})
        assert not result.is_error, result.content
        samples.append((time.perf_counter() - started - base) / len(queries))
    label = f"{tools} tools: one proxy.search within a run (a run of {len(queries)}, best of 3)"
    return Row("search", label, f"{min(samples) * 1000:.2f} ms", "p50 < 5 ms")


async def run() -> list[Row]:
    setup_logging("ERROR")
    rows = recall_rows() + index_rows()
    rows += await gateway_rows()
    return rows


async def main() -> None:
    rows = recall_rows() + index_rows() if sys.argv[1:] == ["--index"] else await run()
    widths = [max(len(r[i]) for r in rows) for i in range(1, 4)]
    for row in rows:
        print("  ".join(cell.ljust(w) for cell, w in zip(row[1:], widths, strict=True)).rstrip())


if __name__ == "__main__":
    anyio.run(main)
