"""Tool search on every face of a real `onetool serve --http`, over real upstreams (server-everything, mcp-server-time,
and the rug fixture server, whose description a test rewrites): proxy.search in a snippet, /mcp/direct's
search_tools and call_tool with ``direct.expose: search``, inspect(query=...), the admin API and `onetool tools
--search`. What the control plane hides (a quarantined server, a denied tool) is never found; a description an
upstream changes is found as it is now, escaped."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from onetool.config import Config
from onetool.core.gateway import Gateway
from onetool.errors import ConfigError
from onetool.search import _semantic
from tests.admin_api import admin, cli
from tests.conftest import EVERYTHING_JS, FIXTURES, PYTHON, TIME_SERVER
from tests.gateways import ServedGateway, start_http_gateway, stop, text_of, until, write_config

pytestmark = pytest.mark.anyio

ADMIN = f"search-admin-{uuid.uuid4().hex}"


def search_config() -> dict[str, Any]:
    return {
        "servers": {
            "everything": {"command": "node", "args": [str(EVERYTHING_JS), "stdio"]},
            "time": {"command": TIME_SERVER, "args": ["--local-timezone", "UTC"], "tools": {"deny": ["convert_time"]}},
            "rug": {"command": PYTHON, "args": [str(FIXTURES / "rug_server.py")]},
            "held": {"command": PYTHON, "args": [str(FIXTURES / "rug_server.py"), "--poisoned"], "quarantined": True},
        },
        "http": {"enable_direct_endpoint": True, "enable_inspect_endpoint": True},
        "direct": {"expose": "search"},
    }


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServedGateway]:
    marker = f"search-{uuid.uuid4().hex}"
    folder = tmp_path_factory.mktemp("search")
    gateway = start_http_gateway(folder, search_config(), marker, env={"ONETOOL_ADMIN_TOKEN": ADMIN})
    try:
        yield gateway
    finally:
        assert stop(gateway.proc) == 0


def face(served: ServedGateway, path: str) -> Client:
    return Client(served.url.removesuffix("/mcp") + path, read_timeout_seconds=60)


async def run_value(served: ServedGateway, code: str) -> Any:
    result = await served.run(code)
    assert not result.is_error, text_of(result)
    assert result.structured_content is not None
    return result.structured_content["result"]


# ---- run: proxy.search -------------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_a_snippet_finds_a_tool_and_calls_it(served: ServedGateway, mode: str) -> None:
    code = """\
best = proxy.search("what time is it in Tokyo", limit=3)[0]
[sorted(best), best["tool"], best["server"], time.get_current_time(timezone="Asia/Tokyo")["timezone"]]"""
    result = await served.run(code, mode)
    assert not result.is_error, text_of(result)
    keys, tool, server, zone = result.structured_content["result"]  # type: ignore[index]
    assert keys == ["description", "server", "signature", "tool"]
    assert (tool, server, zone) == ("time.get_current_time", "time", "Asia/Tokyo")


async def test_results_carry_the_signature_and_purpose_the_description_shows(served: ServedGateway) -> None:
    [hit] = await run_value(served, 'proxy.search("add two numbers", limit=1)')
    assert hit == {
        "tool": "everything.get_sum",
        "signature": "everything.get_sum(a: float, b: float)",
        "description": "Returns the sum of two numbers",
        "server": "everything",
    }


async def test_a_pack_name_lists_that_packs_tools(served: ServedGateway) -> None:
    found = await run_value(served, '[h["tool"] for h in proxy.search("everything", limit=10)]')
    assert len(found) == 10 and all(t.startswith("everything.") for t in found), found


async def test_with_the_semantic_extra_tools_are_ranked_by_meaning_too(served: ServedGateway) -> None:
    """The dev extra installs the model: a word one tool has finds that tool first, then the nearest in meaning
    (BM25 alone finds that one tool only), and the tokenizer never complains of the gateway's forks."""
    found = await run_value(served, '[h["tool"] for h in proxy.search("gzip", limit=3)]')
    assert len(found) == 3 and found[0] == "everything.gzip_file_as_resource", found
    assert "tool search ranks by meaning too (search.semantic: auto)" in served.log.read_text()
    assert "tokenizers" not in (served.log.parent / "gateway.stderr").read_text()


async def test_search_semantic_decides_how_the_gateway_ranks(monkeypatch: pytest.MonkeyPatch) -> None:
    """auto loads the model for the first search, which waits for it (a gateway nobody searches never loads
    it: a run that does not search does not); off never loads it; on without a model this version can read is a
    config error before anything starts."""
    for mode, semantic in (("off", False), ("auto", True)):
        async with Gateway(Config.model_validate({"search": {"semantic": mode}}), warm_workers=1) as gateway:
            assert not (await gateway.run("1 + 1")).is_error
            await anyio.sleep(0.5)  # what a load at start would have taken, and more
            assert not gateway.index.semantic
            found = await gateway.run("[h['tool'] for h in proxy.search('list the servers')]")
            assert not found.is_error and "proxy.list_servers" in text_of(found)
            assert gateway.index.semantic is semantic
    monkeypatch.setattr(_semantic, "PACKAGE", "onetool_no_such_model_package")
    _semantic.shared_model.cache_clear()
    try:
        with pytest.raises(ConfigError, match=r"search.semantic is on, but .* is not installed"):
            async with Gateway(Config.model_validate({"search": {"semantic": "on"}})):
                pass
        async with Gateway(Config(), warm_workers=1) as gateway:
            await gateway.index.ready()
            assert not gateway.index.semantic
    finally:
        _semantic.shared_model.cache_clear()


async def test_quarantined_and_denied_tools_are_never_found(served: ServedGateway) -> None:
    queries = ("weather forecast", "convert time zones", "look up a term")
    found = await run_value(served, f'[h["tool"] for q in {queries!r} for h in proxy.search(q, 50)]')
    assert "time.convert_time" not in found  # denied by the server's tools filter
    assert not [t for t in found if t.startswith("held.")]  # a quarantined server
    assert "rug.lookup" in found


@pytest.mark.parametrize(
    "query",
    [
        'name:secret OR "x',
        "NEAR(delete drop) * ^ AND NOT",
        '"""',
        "sum\x00\x1b[2J\u202enumbers",
        "{ }:-- [] () add numbers",
    ],
)
async def test_a_query_is_plain_words_whatever_it_holds(served: ServedGateway, query: str) -> None:
    result = await served.run(f"[h['tool'] for h in proxy.search({query!r})]")
    text = text_of(result)
    if result.is_error:  # only the query with no word at all
        assert "has no word to search for" in text, text
    else:
        assert "fts5" not in text.lower() and "syntax" not in text.lower()


async def test_bad_queries_and_limits_are_refused_with_what_to_do(served: ServedGateway) -> None:
    too_long = await served.run("proxy.search('a' * 5000)")
    assert too_long.is_error and "at most 1,000" in text_of(too_long)
    empty = await served.run("proxy.search('the of and')")
    assert empty.is_error and "no word to search for" in text_of(empty)
    limit = await served.run("proxy.search('time', limit=500)")
    assert limit.is_error and "limit must be 1 to 50" in text_of(limit)


async def test_a_changed_description_is_found_as_it_is_now_and_escaped(served: ServedGateway) -> None:
    hostile = "Translate a glossary entry.\x1b]52;c;cm0gLXJmIH4=\x07 \u202eevil\u202c Now."
    changed = await served.run(f"rug.set_description(text={hostile!r})")
    assert not changed.is_error, text_of(changed)

    async def found() -> Any:
        hits = await run_value(served, 'proxy.search("translate glossary entry", limit=3)')
        return next((h for h in hits if h["tool"] == "rug.lookup"), None)

    hit = await until(found)
    assert "\x1b" not in hit["description"] and "\u202e" not in hit["description"]
    assert "<U+001B" in hit["description"] and "<U+202E" in hit["description"]


# ---- /mcp/direct with direct.expose: search ------------------------------------------------------------------


async def test_direct_in_search_mode_lists_management_tools_and_retrieves_then_calls(served: ServedGateway) -> None:
    async with face(served, "/mcp/direct") as client:
        names = [t.name for t in (await client.list_tools()).tools]
        assert "search_tools" in names and "call_tool" in names
        assert not [n for n in names if ":" in n]  # no upstream tool is listed
        answer = await client.call_tool("search_tools", {"query": "current time in a timezone", "limit": 3})
        assert not answer.is_error, text_of(answer)
        tools = json.loads(text_of(answer))["tools"]
        assert tools[0]["name"] == "time:get_current_time"
        assert tools[0]["inputSchema"]["required"] == ["timezone"]
        called = await client.call_tool(
            "call_tool", {"name": "time:get_current_time", "arguments": {"timezone": "Europe/Paris"}}
        )
        assert not called.is_error and "Europe/Paris" in text_of(called)
        # the name alone works too; a management tool is not reached through call_tool
        direct = await client.call_tool("time:get_current_time", {"timezone": "UTC"})
        assert not direct.is_error
        refused = await client.call_tool("call_tool", {"name": "upstream_servers", "arguments": {}})
        assert refused.is_error and "call 'upstream_servers' itself" in text_of(refused)


async def test_direct_search_finds_no_local_tool_nor_a_hidden_one(served: ServedGateway) -> None:
    async with face(served, "/mcp/direct") as client:
        answer = await client.call_tool("search_tools", {"query": "list servers describe tool", "limit": 50})
        names = [t["name"] for t in json.loads(text_of(answer))["tools"]]
        assert names and all(":" in n for n in names)  # proxy.* are local: not on this endpoint
        assert not [n for n in names if n.startswith("held:") or n == "time:convert_time"]
        bad = await client.call_tool("search_tools", {"query": "x" * 2000})
        assert bad.is_error


# ---- inspect(query=...) ----------------------------------------------------------------------------------------


async def test_inspect_finds_tools_by_query_and_exec_calls_what_it_found(served: ServedGateway) -> None:
    async with face(served, "/mcp/inspect") as client:
        tools = (await client.list_tools()).tools
        assert "inspect(query=" in (tools[0].description or "")
        answer = await client.call_tool("inspect", {"query": "sum of two numbers", "limit": 2})
        assert not answer.is_error, text_of(answer)
        best = answer.structured_content["tools"][0]  # type: ignore[index]
        assert (best["server_name"], best["tool_name"]) == ("everything", "get-sum")
        assert "a: number" in best["input"]
        done = await client.call_tool(
            "exec", {"server_name": best["server_name"], "tool_name": best["tool_name"], "arguments": {"a": 2, "b": 3}}
        )
        assert not done.is_error and "5" in text_of(done)
        neither = await client.call_tool("inspect", {})
        assert neither.is_error and "query" in text_of(neither)
        both = await client.call_tool("inspect", {"server_name": "time", "query": "time"})
        assert both.is_error and "either a query or a server_name" in text_of(both)


# ---- the admin API and the CLI -------------------------------------------------------------------------------


def test_the_admin_api_searches_and_lists(served: ServedGateway) -> None:
    status, body = admin(served.url, "GET", "/admin/tools?query=time%20in%20Tokyo&limit=2", token=ADMIN)
    assert status == 200 and body["tools"][0]["tool"] == "time.get_current_time", body
    status, every = admin(served.url, "GET", "/admin/tools?query=", token=ADMIN)
    names = [t["tool"] for t in every["tools"]]
    assert status == 200 and names == sorted(names) and "everything.get_sum" in names and "proxy.search" in names
    status, body = admin(served.url, "GET", "/admin/tools?query=time&server=everything&limit=50", token=ADMIN)
    assert status == 200 and body["tools"] and {t["server"] for t in body["tools"]} == {"everything"}, body
    status, packs = admin(served.url, "GET", "/admin/tools", token=ADMIN)
    assert status == 200 and "time" in [p["name"] for p in packs["packs"]], packs
    for bad in ("limit=abc", "limit=0", "limit=99999999999"):
        status, body = admin(served.url, "GET", f"/admin/tools?query=time&{bad}", token=ADMIN)
        assert status == 400 and "limit" in body["error"], body
    status, _ = admin(served.url, "GET", "/admin/tools?query=time", token=None)
    assert status == 401


def test_onetool_tools_search_prints_the_best_tools(tmp_path: Path) -> None:
    config = write_config(tmp_path, {"servers": {"time": {"command": TIME_SERVER}}})
    done = cli("tools", "--config", str(config), "--search", "what time is it now", "--limit", "1")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("time.get_current_time(timezone: str)")
    nothing = cli("tools", "--config", str(config), "--search", "the")
    assert nothing.returncode == 2 and "no word to search for" in nothing.stderr


def test_onetool_tools_search_ranks_as_search_semantic_says(tmp_path: Path) -> None:
    """``convert`` is a word of one tool: off, BM25 finds that one alone (fused, the nearest in meaning would
    follow, as on the gateway above). With ``on`` and a model package this version cannot read (one shadowing
    the installed), the command refuses before any server starts."""
    servers = {"time": {"command": TIME_SERVER}}
    search = ("tools", "--search", "convert", "--limit", "5")
    off = cli(*search, "--config", str(write_config(tmp_path, {"servers": servers, "search": {"semantic": "off"}})))
    assert off.returncode == 0, off.stderr
    assert [line.split("(")[0] for line in off.stdout.splitlines() if not line.startswith(" ")] == ["time.convert_time"]
    shadow = tmp_path / "shadow" / "wordllama"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("")
    config = write_config(tmp_path, {"servers": servers, "search": {"semantic": "on"}})
    refused = cli(*search, "--config", str(config), env={"PYTHONPATH": str(shadow.parent)})
    assert refused.returncode == 2 and refused.stdout == "", refused
    assert "search.semantic is on, but " in refused.stderr and "pip install 'onetool[semantic]'" in refused.stderr
