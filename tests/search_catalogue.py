"""The search catalogue: real tools of real MCP servers (fixtures/search_catalogue.json, made by
fixtures/dump_search_catalogue.py) and tasks in a user's words with the tools that do them
(fixtures/search_tasks.json), as registries, for the ranking tests and the search benchmark."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mcp import types

from onetool.config import to_identifier
from onetool.registry import Pack, Registry
from onetool.registry._registry import upstream_tools
from onetool.search import ToolIndex

if TYPE_CHECKING:
    from onetool.search import Model
from onetool.upstream import ServerState, ServerStatus

FIXTURES = Path(__file__).resolve().parent / "fixtures"
CATALOGUE_FILE = FIXTURES / "search_catalogue.json"
TASKS_FILE = FIXTURES / "search_tasks.json"


@dataclass(frozen=True)
class Task:
    task: str
    tools: tuple[str, ...]
    """``pack.tool`` names, any of which does the task."""


@cache
def recorded() -> dict[str, Any]:
    """Each server's recorded entry: package, registry, version, serverInfo, instructions, tools."""
    return dict(json.loads(CATALOGUE_FILE.read_text()))


@cache
def tasks() -> tuple[Task, ...]:
    return tuple(Task(t["task"], tuple(t["tools"])) for t in json.loads(TASKS_FILE.read_text()))


def tool_count() -> int:
    return sum(len(entry["tools"]) for entry in recorded().values())


def status(server: str, tools: int, instructions: str | None) -> ServerStatus:
    return ServerStatus(
        name=server,
        pack=to_identifier(server),
        type="stdio",
        enabled=True,
        status=ServerState.CONNECTED,
        error=None,
        tool_count=tools,
        protocol_version="2025-11-25",
        instructions=instructions,
    )


def server_pack(server: str, entry: dict[str, Any], name: str | None = None) -> tuple[Pack, ServerStatus]:
    """The pack of one recorded server (as ``name``: a copy under another server name)."""
    name = name or server
    pack_name = to_identifier(name)
    tools = [types.Tool.model_validate(t) for t in entry["tools"]]
    pack = Pack(name=pack_name, tools=upstream_tools(pack_name, name, tools), server=name)
    return pack, status(name, len(tools), entry.get("instructions"))


def registry(servers: Iterable[str] | None = None, at_least: int = 0) -> Registry:
    """The recorded servers (or those named) as one registry; with ``at_least``, copies of them under other names
    (``github_2``...) are added until it holds that many tools."""
    entries = recorded()
    chosen = list(servers) if servers is not None else list(entries)
    packs: dict[str, Pack] = {}
    statuses: dict[str, ServerStatus] = {}
    copy, count = 1, 0
    while True:
        for server in chosen:
            name = server if copy == 1 else f"{server}_{copy}"
            pack, st = server_pack(server, entries[server], name)
            packs[pack.name], statuses[name] = pack, st
            count += len(pack.tools)
            if copy > 1 and count >= at_least:
                return Registry(packs, statuses)
        if count >= at_least:
            return Registry(packs, statuses)
        copy += 1


def indexed(reg: Registry | None = None, model: Model | None = None) -> ToolIndex:
    index = ToolIndex(model)
    index.update(reg or registry())
    return index


def recall(index: ToolIndex, cases: Sequence[Task], k: int) -> float:
    """The share of ``cases`` with a right tool among the first ``k`` results."""
    found = 0
    for case in cases:
        hits = [h.tool for h in index.search(case.task, k)]
        found += any(tool in hits for tool in case.tools)
    return found / len(cases)
