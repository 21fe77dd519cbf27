"""The semantic half of tool search (the ``semantic`` extra, which the dev extra installs), on the search catalogue
and without a process: a task said in other words is found by meaning; a query whose words no tool has still
finds nothing; a changed pack alone is embedded again; the model is read from the installed package's files (the
package is never imported), and what ``search.semantic`` does when it is missing or not what this version reads."""

from __future__ import annotations

import dataclasses
import json
import struct
import sys
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import TYPE_CHECKING

import anyio
import pytest

from onetool.errors import ConfigError
from onetool.registry import Pack, Registry, UpstreamTool
from onetool.search import ToolIndex, _semantic, semantic_model
from onetool.search._semantic import TENSOR, TOKENIZER, WEIGHTS, ModelMissing
from tests.search_catalogue import indexed, registry

if TYPE_CHECKING:
    from onetool.search import Model


@pytest.fixture(scope="module")
def model() -> Model:
    made = semantic_model("on")
    assert made is not None
    return made


@pytest.fixture(scope="module")
def catalogue() -> Registry:
    return registry()


@pytest.fixture(scope="module")
def bm25(catalogue: Registry) -> Iterator[ToolIndex]:
    with closing(indexed(catalogue)) as made:
        yield made


@pytest.fixture(scope="module")
def fused(catalogue: Registry, model: Model) -> Iterator[ToolIndex]:
    with closing(indexed(catalogue, model)) as made:
        yield made


def tools(index: ToolIndex, query: str, limit: int = 10) -> list[str]:
    return [h.tool for h in index.search(query, limit)]


@pytest.mark.parametrize(
    ("task", "tool"),
    [
        ("who is in our Notion workspace", "notion.API_get_users"),
        ("find open source repositories about rust web frameworks on GitHub", "github.search_repositories"),
    ],
)
def test_a_task_in_other_words_is_found_by_meaning(bm25: ToolIndex, fused: ToolIndex, task: str, tool: str) -> None:
    assert fused.semantic and not bm25.semantic
    assert tool not in tools(bm25, task, 10)
    assert tool in tools(fused, task, 3)


def test_a_model_given_later_ranks_as_one_given_at_first(catalogue: Registry, model: Model, fused: ToolIndex) -> None:
    """The gateway's index is built before its model has loaded, then told to use it."""
    with closing(indexed(catalogue)) as later:
        assert not later.semantic
        later.use(model)
        assert later.semantic
        for task in ("who is in our Notion workspace", "list my GitHub repos", "send an email"):
            assert tools(later, task, 20) == tools(fused, task, 20)


@pytest.mark.anyio
async def test_a_search_waits_for_a_model_on_its_way(catalogue: Registry, model: Model) -> None:
    """The gateway loads its model while the servers connect: a face's search awaits ``ready()`` first."""
    ranked: list[bool] = []

    async def search() -> None:
        await index.ready()
        ranked.append(index.semantic)

    with closing(indexed(catalogue)) as index:
        await index.ready()  # no model coming: at once
        index.model_coming()
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(search)
            for _ in range(10):
                await anyio.sleep(0)
            assert ranked == []
            index.use(model)
            index.model_settled()
        assert ranked == [True]


def test_a_query_whose_words_no_tool_has_still_finds_nothing(bm25: ToolIndex, fused: ToolIndex) -> None:
    """Every tool has a cosine with any query: the nearest to noise are not an answer."""
    for query in ("xyzzy plugh", "bake a chocolate cake"):
        assert bm25.search(query) == fused.search(query) == []


def test_a_changed_pack_alone_is_embedded_again(
    catalogue: Registry, model: Model, monkeypatch: pytest.MonkeyPatch
) -> None:
    embedded: list[str] = []
    embed = model.embed
    monkeypatch.setattr(model, "embed", lambda text: embedded.append(text) or embed(text))
    with closing(indexed(catalogue, model)) as index:
        assert len(embedded) == len(index)
        embedded.clear()
        packs = dict(catalogue.packs)
        old = packs["time"].tools["get_current_time"]
        assert isinstance(old, UpstreamTool)
        changed = dataclasses.replace(old, description="Tell the hour on Mars for a colony.")
        packs["time"] = Pack("time", {**packs["time"].tools, "get_current_time": changed}, server="time")
        del packs["notion"]
        assert index.update(Registry(packs, {s.name: s for s in catalogue.servers()})) == ["notion", "time"]
        assert len(embedded) == len(packs["time"].tools)
        assert "Tell the hour on Mars" in " ".join(embedded)
        embedded.clear()
        assert tools(index, "hour on Mars colony", 1) == ["time.get_current_time"]
        assert embedded == ["hour on Mars colony"]  # the query, once
        assert not [t for t in tools(index, "who is in our Notion workspace", 50) if t.startswith("notion.")]


def test_the_model_is_read_from_the_package_files_which_is_never_imported(model: Model) -> None:
    """Importing ``wordllama`` would set the root logger up, and its loader downloads a tokenizer it misplaces."""
    assert "wordllama" not in sys.modules
    assert model.dimensions == 256 and model.mapped_bytes() == 32_000 * 256 * 2
    assert model.embed("").tolist() == [0.0] * 256
    assert abs(float((model.embed("create an issue") ** 2).sum()) - 1) < 1e-5


def test_without_the_extra_auto_ranks_by_words_and_on_refuses_to_start(monkeypatch: pytest.MonkeyPatch) -> None:
    assert semantic_model("off") is None
    monkeypatch.setattr(_semantic, "PACKAGE", "onetool_no_such_model_package")
    _semantic.shared_model.cache_clear()
    try:
        assert semantic_model("auto") is None
        with pytest.raises(ConfigError) as refused:
            semantic_model("on")
    finally:
        _semantic.shared_model.cache_clear()
    assert str(refused.value) == (
        "search.semantic is on, but the 'onetool_no_such_model_package' package is not installed: "
        "pip install 'onetool[semantic]', or set search.semantic to auto or off"
    )
    # numpy or tokenizers missing: the semantic module itself cannot be imported
    monkeypatch.setitem(sys.modules, "onetool.search._semantic", None)
    assert semantic_model("auto") is None
    with pytest.raises(ConfigError, match=r"is not installed: pip install 'onetool\[semantic\]'"):
        semantic_model("on")


def _package(root: Path, header: dict[str, object], data: bytes) -> None:
    """A package named ``fakemodel`` under ``root`` with a weights file of ``header`` and ``data``."""
    package = root / "fakemodel"
    (package / WEIGHTS).parent.mkdir(parents=True)
    (package / TOKENIZER).parent.mkdir(parents=True)
    (package / "__init__.py").write_text("raise RuntimeError('the model package is never imported')\n")
    head = json.dumps(header).encode()
    (package / WEIGHTS).write_bytes(struct.pack("<Q", len(head)) + head + data)
    (package / TOKENIZER).write_text("{}")


@pytest.mark.parametrize(
    ("header", "data", "says"),
    [
        ({TENSOR: {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 16]}}, bytes(16), "no float16 matrix"),
        ({"other": {"dtype": "F16", "shape": [2, 2], "data_offsets": [0, 8]}}, bytes(8), "no float16 matrix"),
        ({TENSOR: {"dtype": "F16", "shape": [2, 2], "data_offsets": [0, 6]}}, bytes(6), "takes 6 bytes, not 2x2"),
        (None, b"", "is missing"),
    ],
)
def test_a_model_package_laid_out_otherwise_is_refused_by_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, header: dict[str, object] | None, data: bytes, says: str
) -> None:
    if header is None:
        (tmp_path / "fakemodel").mkdir()
        (tmp_path / "fakemodel" / "__init__.py").write_text("")
    else:
        _package(tmp_path, header, data)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(_semantic, "PACKAGE", "fakemodel")
    with pytest.raises(ModelMissing, match=says):
        _semantic.Model.load()
    assert "fakemodel" not in sys.modules
