"""The ranking rules of the tool index, on the search catalogue (568 real tools of 30 real servers, no process
started): words, short queries, ties, determinism, updates pack by pack, visibility, escaping, hostile queries,
and a floor under recall on the tasks written in a user's words. Each holds for BM25 alone (``search.semantic:
off``) and fused with the semantic extra's model (installed with the dev extra)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from contextlib import closing
from typing import TYPE_CHECKING

import pytest

from onetool.errors import ArgumentError
from onetool.registry import Pack, Registry, UpstreamTool
from onetool.search import MAX_LIMIT, ToolIndex, semantic_model
from onetool.search._related import related
from onetool.search._words import words
from tests.search_catalogue import indexed, recall, recorded, registry, server_pack, tasks, tool_count

if TYPE_CHECKING:
    from onetool.search import Model


@pytest.fixture(scope="module")
def catalogue() -> Registry:
    return registry()


@pytest.fixture(scope="module", params=["bm25", "fused"])
def model(request: pytest.FixtureRequest) -> Model | None:
    """The ranking: BM25 alone, or fused with the model."""
    return semantic_model("on") if request.param == "fused" else None


@pytest.fixture(scope="module")
def index(catalogue: Registry, model: Model | None) -> Iterator[ToolIndex]:
    with closing(indexed(catalogue, model)) as made:
        yield made


@pytest.fixture
def fresh(catalogue: Registry, model: Model | None) -> Iterator[ToolIndex]:
    """An index of the catalogue this test may change."""
    with closing(indexed(catalogue, model)) as made:
        yield made


def tools(index: ToolIndex, query: str, limit: int = 10) -> list[str]:
    return [h.tool for h in index.search(query, limit)]


def test_the_catalogue_is_several_hundred_real_tools_with_their_versions() -> None:
    assert tool_count() >= 300 and len(tasks()) >= 100
    for server, entry in recorded().items():
        assert entry["package"] and entry["version"] and entry["registry"] in ("npm", "pypi"), server


def test_identifiers_split_and_names_stay_whole_in_queries() -> None:
    assert words("getFileContents") == ["getfilecont", "get", "file", "content"]
    assert words("get_file_contents") == words("get-file-contents")[:3] == ["get", "file", "content"]
    assert words("HTTPServer list_PRs") == ["httpserver", "http", "server", "list", "prs"]
    assert words("the GitHub repos", split_camel=False) == ["github", "repo"]
    assert words("deleting deleted deletes") == ["delet"] * 3
    assert words("a to-do for the e-mail") == ["todo", "mail", "email"]


def test_related_words_widen_a_query_without_repeating_it() -> None:
    widened = related(words("remove a folder"))
    assert "delet" in widened and "directori" in widened
    assert "remov" not in widened and "folder" not in widened
    assert "request" in related(words("open a PR"))  # a two-word phrase of the same group


def test_a_pack_name_lists_that_packs_tools(index: ToolIndex) -> None:
    found = tools(index, "github")
    assert len(found) == 10 and all(t.startswith("github.") for t in found), found
    assert all(t.startswith("slack.") for t in tools(index, "Slack", 8))


def test_user_words_find_the_tool(index: ToolIndex) -> None:
    assert "filesystem.create_directory" in tools(index, "make a folder called reports", 5)
    assert "time.get_current_time" in tools(index, "what time is it in Tokyo right now", 3)
    assert "github.create_pull_request" in tools(index, "open a PR on GitHub from my branch", 3)


def test_equal_scores_come_in_one_order_whatever_order_the_packs_came_in(
    catalogue: Registry, model: Model | None
) -> None:
    twin = {"name": "lookup", "description": "Look up a glossary term.", "inputSchema": {"type": "object"}}
    twins = [server_pack(name, {"tools": [twin], "instructions": None}) for name in ("zeta", "alpha", "mid", "kappa")]
    orders = []
    for packs in (twins, twins[::-1], twins[1:] + twins[:1]):
        with closing(ToolIndex(model)) as index:
            for pack, status in packs:  # one pack at a time, as servers connect
                index.update(
                    Registry({**{p.name: p for p, _ in packs[: packs.index((pack, status))]}, pack.name: pack})
                )
            orders.append(tools(index, "glossary term"))
    assert orders[0] == orders[1] == orders[2] and sorted(orders[0]) == [
        f"{n}.lookup" for n in ("alpha", "kappa", "mid", "zeta")
    ]
    # The whole catalogue, its packs indexed one at a time in the opposite order: the same answers.
    with closing(indexed(catalogue, model)) as one, closing(ToolIndex(model)) as other:
        names = list(catalogue.packs)
        for i in range(len(names)):
            other.update(Registry({n: catalogue.packs[n] for n in names[len(names) - 1 - i :]}, {}))
        other.update(catalogue)
        for query in ("github", "list", "create an issue", "search the web", "read a file", "wikipedia"):
            assert tools(one, query, 50) == tools(other, query, 50)


def test_an_update_reindexes_only_the_packs_that_changed(catalogue: Registry, fresh: ToolIndex) -> None:
    index = fresh
    assert index.update(catalogue) == []  # a rebuilt registry with the same tools changes nothing
    packs = dict(catalogue.packs)
    old = packs["time"].tools["get_current_time"]
    assert isinstance(old, UpstreamTool)
    changed = dataclasses.replace(old, description="Tell the hour on Mars for a colony.")
    packs["time"] = Pack("time", {**packs["time"].tools, "get_current_time": changed}, server="time")
    del packs["figma"]
    status = {s.name: s for s in catalogue.servers()}
    assert index.update(Registry(packs, status)) == ["figma", "time"]
    assert tools(index, "hour on Mars colony", 1) == ["time.get_current_time"]
    assert not [t for t in tools(index, "figma design", 50) if t.startswith("figma.")]
    assert len(index) == len(catalogue.packs["time"].tools) + sum(
        len(p.tools) for n, p in catalogue.packs.items() if n not in ("time", "figma")
    )


def test_visibility_narrows_what_is_found(index: ToolIndex) -> None:
    upstream_only = index.search("github", 10, lambda tool: tool.pack != "github")
    assert upstream_only and not [h for h in upstream_only if h.tool.startswith("github.")]
    assert index.search("github", 5, lambda tool: False) == []


def test_descriptions_come_back_escaped(model: Model | None) -> None:
    hostile = {
        "name": "paint",
        "description": "Paint a wall red.\x1b[31m\x1b]52;c;cm0gLXJm\x07 \u202edone\u2066",
        "inputSchema": {"type": "object", "properties": {"x\nevil": {"type": "string"}}},
    }
    pack, status = server_pack("evil", {"tools": [hostile], "instructions": None})
    with closing(indexed(Registry({pack.name: pack}, {"evil": status}), model)) as index:
        [hit] = index.search("paint a wall")
    for text in (hit.description, hit.signature):
        assert not any(c in text for c in "\x1b\x07\u202e\u2066\n"), text
    assert "<U+001B CONTROL>" in hit.description and "<U+202E RIGHT-TO-LEFT OVERRIDE>" in hit.description
    assert "'x\\nevil'" in hit.signature  # a parameter name is quoted, as the run description shows it


@pytest.mark.parametrize(
    "query",
    [
        '"',
        "name:github OR pack:*",
        "NEAR(create issue, 2)",
        "create* ^issue AND NOT -pull",
        "issue\x00\x1b[2J\u202e\ud800",
        "{} [] () : ; ' \" ` \\",
        "\u6771\u4eac caf\u00e9 \u0645\u0631\u062d\u0628\u0627",
    ],
)
def test_a_query_is_plain_words(index: ToolIndex, query: str) -> None:
    try:
        index.search(query)
    except ArgumentError as e:
        assert "has no word to search for" in str(e)


def test_queries_and_limits_are_bounded(index: ToolIndex) -> None:
    with pytest.raises(ArgumentError, match="at most 1,000"):
        index.search("find " * 1000)
    with pytest.raises(ArgumentError, match="no word to search for"):
        index.search("the and of with")
    for limit in (0, MAX_LIMIT + 1):
        with pytest.raises(ArgumentError, match="limit must be"):
            index.search("issue", limit)
    assert len(index.search("a b c d e f g h i j k l m n o p q r s t u v w x y z " * 10 + "issue", MAX_LIMIT)) == 50
    with pytest.raises(ArgumentError, match="limit must be a number"):
        index.find("issue", "9" * 5000)
    assert len(index.find(None)) == len(index) and len(index.find("issue", "3")) == 3


def test_recall_on_the_tasks_stays_above_its_floor(index: ToolIndex) -> None:
    """A regression floor a little under what `make bench` measures: BM25 alone recall@1 / @5 / @10 0.42 / 0.79 /
    0.88, fused 0.52 / 0.90 / 0.96."""
    floors = (0.48, 0.87, 0.93) if index.semantic else (0.38, 0.75, 0.85)
    found = [recall(index, tasks(), k) for k in (1, 5, 10)]
    assert all(share >= floor for share, floor in zip(found, floors, strict=True)), found
