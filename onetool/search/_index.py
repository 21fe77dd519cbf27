"""The tool index: every visible tool of the registry in an in-memory SQLite FTS5 table, ranked by BM25.

Each tool is one row whose fields are ranked with their own weight (:data:`WEIGHTS`): its name, its pack and
server, what it does (the description), its parameters (names and descriptions), the words related to its own
(:mod:`._related`) and its server's instructions. Texts are made words by :mod:`._words` before SQLite sees them,
and a query the same way, each word then quoted: a query is plain words, never FTS5 syntax.

The index follows the registry (:meth:`ToolIndex.update`, after every registry rebuild): a pack whose tools, as
the index reads them, did not change is left as it is, so one server's change costs that server's tools only.
What it holds is what the registry holds, which the control plane's one visibility answer decided
(``control.shown``: no disabled, failed, quarantined, held or denied tool); :meth:`ToolIndex.search` narrows it
further with ``visible`` (a face that shows only upstream tools; a caller's profile, later). Ties are broken by a
hash of the tool's name, so every replica with the same catalogue gives the same answer.

With the ``semantic`` extra (``search.semantic``, :mod:`._extra`), each tool is also a vector of what it means
(:mod:`._semantic`, embedded when its pack is indexed) and a search ranks every tool by BM25 and by its vector's
closeness to the query's, fused; a query none of whose words (or their related words) any tool has still finds
nothing, so a word no tool knows is not answered with the tools nearest to noise.

Work is bounded by constants before it starts: a query's characters (:data:`MAX_QUERY_CHARS`) and words
(:data:`MAX_QUERY_WORDS`), the results (:data:`MAX_LIMIT`), and the text of each tool read into the index.
"""

from __future__ import annotations

import hashlib
import sqlite3
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any

import anyio

from onetool.errors import ArgumentError
from onetool.registry import LocalTool, Pack, Registry, Tool, UpstreamTool
from onetool.search._related import related
from onetool.search._words import words
from onetool.text import one_line, shown_name, visible

if TYPE_CHECKING:
    from onetool.search._semantic import Model, Vectors

__all__ = ["DEFAULT_LIMIT", "MAX_LIMIT", "MAX_QUERY_CHARS", "MAX_QUERY_WORDS", "Hit", "ToolIndex", "Visible"]

MAX_QUERY_CHARS = 1_000
"""A query longer than this is refused: a need is said in a sentence, and the work of a search follows its length."""
MAX_QUERY_WORDS = 32
"""Distinct words of a query searched for, the first ones."""
DEFAULT_LIMIT = 10
MAX_LIMIT = 50
MAX_DESCRIPTION_CHARS = 300
"""Of a tool's description, indexed: its first sentences say what it does, the rest how (usage notes, examples,
warnings), and BM25 reads a long text's every word as worth less, which would rank a tool by how much its author
wrote rather than by what it does."""
MAX_PARAMS_CHARS = 300
"""Of a tool's parameter names and descriptions together, indexed (for the same reason)."""
MAX_INSTRUCTIONS_CHARS = 300
"""Of a server's instructions, indexed for each of its tools (for the same reason)."""
ORIGINAL_REPEATS = 2
"""A query's own words count this many times a related word (:mod:`._related`): BM25 in FTS5 has no weight per
term, but a phrase given twice counts twice."""
MAX_RELATED = 64
"""Related words a query is widened by, at most."""
MAX_SIGNATURE_CHARS = 500
"""Of a signature in a result (a tool of a hundred parameters has a long one; proxy.describe has it whole)."""
MAX_PURPOSE_CHARS = 300
"""Of a description in a result: its first sentence, as listings show it."""

FIELDS = ("name", "pack", "purpose", "params", "instructions")
WEIGHTS = (6.0, 3.0, 2.0, 1.0, 0.3)
"""BM25 weight of each field, in FIELDS order: a word of the tool's name says most; one of its server's
instructions, said of every tool of that server, least."""

_ROWIDS = 2**63
Visible = Callable[[Tool], bool]
"""Whether a tool of the index may be shown to whoever searches."""


@dataclass(frozen=True)
class Hit:
    """One tool found: ``tool`` as a snippet calls it (``pack.tool``), its ``signature`` and ``description`` (the
    first sentence, invisible characters named) as the ``run`` description writes them, and the configured
    ``server`` it comes from (None for a local pack's tool). The texts are made when first read: most tools are
    indexed far more often than they are found."""

    tool: str
    target: Tool

    @property
    def server(self) -> str | None:
        return self.target.server if isinstance(self.target, UpstreamTool) else None

    @cached_property
    def signature(self) -> str:
        return visible(one_line(self.target.signature, MAX_SIGNATURE_CHARS), keep="")

    @cached_property
    def description(self) -> str:
        return visible(one_line(self.target.summary, MAX_PURPOSE_CHARS), keep="")

    def to_dict(self) -> dict[str, Any]:
        return {"tool": self.tool, "signature": self.signature, "description": self.description, "server": self.server}


@dataclass(frozen=True)
class _Pack:
    key: tuple[Any, ...]
    """What the index read of the pack: equal keys, the same rows."""
    rows: tuple[int, ...]


class ToolIndex:
    """The tools of one registry, searchable; by meaning too with a ``model`` (:func:`.semantic_model`; or one
    given later to :meth:`use`). Used
    from the event loop only (the SQLite connection is not shared between threads); every step is bounded (see
    the module's docstring)."""

    def __init__(self, model: Model | None = None) -> None:
        self._vectors: Vectors | None = None
        self._coming: anyio.Event | None = None
        self._wanted = anyio.Event()
        self._db = sqlite3.connect(":memory:")
        self._db.execute(
            f"CREATE VIRTUAL TABLE tools USING fts5({', '.join(FIELDS)}, tokenize='unicode61 remove_diacritics 0')"
        )
        self._packs: dict[str, _Pack] = {}
        self._hits: dict[int, Hit] = {}
        self._rank = f"bm25(tools, {', '.join(map(str, WEIGHTS))})"
        if model is not None:
            self.use(model)

    def __len__(self) -> int:
        return len(self._hits)

    @property
    def semantic(self) -> bool:
        """Whether it ranks by meaning too."""
        return self._vectors is not None

    def model_coming(self) -> None:
        """A model will be loaded for this index once it is first searched (:meth:`searched`): :meth:`ready`
        waits until :meth:`model_settled`."""
        self._coming = anyio.Event()
        self._wanted = anyio.Event()

    async def searched(self) -> None:
        """Return once a search has waited on :meth:`ready` (a model was coming): the time to load it."""
        await self._wanted.wait()

    def model_settled(self) -> None:
        """The model that was coming is in use, or none will come: :meth:`ready` returns at once."""
        if self._coming is not None:
            self._coming.set()

    async def ready(self) -> None:
        """Return once the index ranks as it will (a model coming is in use, or will not come): every search of a
        face awaits this first, so that the first search of a gateway ranks as the later ones."""
        if self._coming is not None:
            self._wanted.set()
            await self._coming.wait()

    def use(self, model: Model) -> None:
        """Rank by meaning too from now on: the tools the index holds are embedded now (the gateway's model is
        loaded after its index was first built), and each pack that changes later when it is re-indexed."""
        if self._vectors is not None:
            return
        from onetool.search._semantic import Vectors

        vectors = Vectors(model)
        for name, kept in self._packs.items():
            vectors.put(name, [(rowid, self._hits[rowid].target) for rowid in kept.rows])
        vectors.stack()
        self._vectors = vectors

    def vector_bytes(self) -> int:
        """What the tools' vectors take (none without the semantic extra); the model's pages are not counted."""
        return self._vectors.nbytes() if self._vectors is not None else 0

    def database_bytes(self) -> int:
        """What the SQLite side of the index takes (its pages; the hits are Python objects beside it)."""
        pages = self._db.execute("PRAGMA page_count").fetchone()[0]
        return int(pages) * int(self._db.execute("PRAGMA page_size").fetchone()[0])

    def close(self) -> None:
        self._db.close()

    def update(self, registry: Registry) -> list[str]:
        """Make the index hold ``registry``'s tools, re-reading only the packs that changed; the packs
        re-indexed or dropped, in order."""
        changed: list[str] = []
        with self._db:
            for name in sorted(self._packs.keys() - registry.packs.keys()):
                self._drop(name)
                changed.append(name)
            for name, pack in registry.packs.items():
                status = registry.pack_status(pack)
                instructions = (status.instructions or "") if status is not None else ""
                key = _key(pack, instructions)
                kept = self._packs.get(name)
                if kept is not None and kept.key == key:
                    continue
                if kept is not None:
                    self._drop(name)
                self._packs[name] = _Pack(key, self._add(pack, instructions))
                changed.append(name)
        if changed and self._vectors is not None:
            self._vectors.stack()
        return changed

    def search(self, query: str, limit: int = DEFAULT_LIMIT, visible: Visible | None = None) -> list[Hit]:
        """The tools that best answer ``query``, best first, at most ``limit`` (1 to MAX_LIMIT) of those
        ``visible`` lets through. Raises ArgumentError, for the model, for a query that is too long or has no
        word to search for, or a limit out of range."""
        terms = query_terms(query)
        if not 1 <= limit <= MAX_LIMIT:
            raise ArgumentError(f"limit must be 1 to {MAX_LIMIT}, got {limit}")
        widened = related(terms)[:MAX_RELATED]
        match = " OR ".join(f'"{term}"' for term in [*terms * ORIGINAL_REPEATS, *widened])
        vectors = self._vectors
        ranked = (
            self._ranked(match, limit if visible is None else -1)
            if vectors is None
            else self._fused(vectors, query, match)
        )
        found: list[Hit] = []
        for rowid in ranked:
            hit = self._hits[rowid]
            if visible is None or visible(hit.target):
                found.append(hit)
                if len(found) == limit:
                    break
        return found

    def _ranked(self, match: str, limit: int) -> Iterator[int]:
        """The rowids ``match`` finds, by BM25 (``limit`` -1: all of them)."""
        # Among equal ranks, by rowid: a hash of the tool's name (not the order the packs came in), so every
        # replica answers the same; reading a column to sort by would cost each row found its content.
        rows = self._db.execute(
            f"SELECT rowid FROM tools WHERE tools MATCH ? ORDER BY {self._rank}, rowid LIMIT ?", (match, limit)
        )
        return (rowid for (rowid,) in rows)

    def _fused(self, vectors: Vectors, query: str, match: str) -> list[int]:
        """Every rowid, by BM25 and meaning fused (:func:`._semantic.fuse`); none when ``match`` finds none."""
        from onetool.search._semantic import fuse

        bm25 = {
            rowid: -score
            for rowid, score in self._db.execute(f"SELECT rowid, {self._rank} FROM tools WHERE tools MATCH ?", (match,))
        }
        if not bm25:
            return []
        return fuse(vectors.rowids, vectors.cosines(query), bm25)

    def find(self, query: str | None, limit: str | None = None, server: str | None = None) -> list[Hit]:
        """A search as a URL's query string gives it (the admin API, the console, the CLI): every tool without a
        query; ``limit`` as text; only the tools of ``server`` (a configured server or a pack's name) when given.
        Raises ArgumentError as :meth:`search` does, and for a limit that is no number."""
        visible = None if server is None else _of(server)
        if query is None or not query.strip():
            return self.every(visible)
        if limit is not None and not (limit.isdecimal() and len(limit) <= 3):
            raise ArgumentError(f"limit must be a number of tools, 1 to {MAX_LIMIT}, not {shown_name(limit[:40])!r}")
        return self.search(query, int(limit) if limit is not None else DEFAULT_LIMIT, visible)

    def every(self, visible: Visible | None = None) -> list[Hit]:
        """Every tool of the index (that ``visible`` lets through), by name."""
        return sorted((h for h in self._hits.values() if visible is None or visible(h.target)), key=lambda h: h.tool)

    def _add(self, pack: Pack, instructions: str) -> tuple[int, ...]:
        """Index ``pack``'s tools (and embed them, with a model); their rowids."""
        rows = tuple(self._rows(pack, instructions))
        if self._vectors is not None:
            self._vectors.put(pack.name, [(rowid, self._hits[rowid].target) for rowid in rows])
        return rows

    def _rows(self, pack: Pack, instructions: str) -> Iterator[int]:
        about = " ".join(words(instructions[:MAX_INSTRUCTIONS_CHARS]))
        for tool in pack.tools.values():
            hit = Hit(f"{pack.name}.{tool.name}", tool)
            rowid = self._rowid(hit.tool)
            name, purpose, params = words(tool.name), words(tool.description[:MAX_DESCRIPTION_CHARS]), _params(tool)
            fields = (
                " ".join(name),
                " ".join(words(f"{pack.name} {pack.server or ''}")),
                " ".join(purpose),
                " ".join(params),
                about,
            )
            self._db.execute(
                f"INSERT INTO tools (rowid, {', '.join(FIELDS)}) VALUES (?, ?, ?, ?, ?, ?)", (rowid, *fields)
            )
            self._hits[rowid] = hit
            yield rowid

    def _rowid(self, name: str) -> int:
        """A rowid made from ``name`` (63 bits of its hash), the next free one in the rare collision."""
        rowid = int.from_bytes(hashlib.blake2b(name.encode("utf-8", "surrogatepass"), digest_size=8).digest()) >> 1
        while rowid in self._hits:
            rowid = (rowid + 1) % _ROWIDS
        return rowid

    def _drop(self, name: str) -> None:
        kept = self._packs.pop(name)
        marks = ", ".join("?" * len(kept.rows))
        if kept.rows:
            self._db.execute(f"DELETE FROM tools WHERE rowid IN ({marks})", kept.rows)
        for rowid in kept.rows:
            del self._hits[rowid]
        if self._vectors is not None:
            self._vectors.drop(name)


def query_terms(query: str) -> list[str]:
    """The distinct words ``query`` is searched by (at most MAX_QUERY_WORDS), or an ArgumentError that says why
    there are none."""
    if len(query) > MAX_QUERY_CHARS:
        raise ArgumentError(
            f"the query is {len(query):,} characters long; at most {MAX_QUERY_CHARS:,}: say what the tool should do "
            'in a few words, e.g. "create a GitHub issue"'
        )
    terms = list(dict.fromkeys(words(query, split_camel=False)))[:MAX_QUERY_WORDS]
    if not terms:
        raise ArgumentError(
            f"the query {shown_name(query)!r} has no word to search for (common words such as 'the' or 'with' are "
            'left out): say what the tool should do, e.g. "create a GitHub issue"'
        )
    return terms


def _params(tool: Tool) -> list[str]:
    """The words of a tool's parameter names and (an upstream's) parameter descriptions."""
    if isinstance(tool, UpstreamTool):
        parts: list[str] = []
        for name, sub in tool.schema.properties.items():
            parts.append(name)
            if isinstance(sub, Mapping) and isinstance(sub.get("description"), str):
                parts.append(sub["description"])
        text = " ".join(parts)
    elif isinstance(tool, LocalTool):
        text = " ".join(tool.parameters.parameters)
    else:
        text = ""
    return words(text[:MAX_PARAMS_CHARS])


def _key(pack: Pack, instructions: str) -> tuple[Any, ...]:
    """Everything the index reads of ``pack``: cheap to make for every pack after every registry rebuild."""
    return (
        pack.server,
        instructions,
        *((t.name, t.description, t.signature, _param_texts(t)) for t in pack.tools.values()),
    )


def _param_texts(tool: Tool) -> tuple[Any, ...]:
    if isinstance(tool, UpstreamTool):
        return tuple(s.get("description") if isinstance(s, Mapping) else None for s in tool.schema.properties.values())
    return ()


def _of(server: str) -> Visible:
    """The tools of ``server``: a configured server's, or a pack's (a local pack has no server)."""
    return lambda tool: server in (tool.pack, tool.server if isinstance(tool, UpstreamTool) else None)
