"""The semantic half of the ranking (the ``semantic`` extra): what a query means, beside the words it shares.

BM25 finds a tool when a task shares its words or their everyday synonyms: "who is in our Notion workspace"
shares only the pack's name with Notion's ``API-get-users``, 26th by BM25 alone. Here each tool and each query
is a vector, the mean of its tokens' rows in a static embedding model, and closeness is their cosine: a
lookup and a product, no neural network run and nothing fetched.

The model is WordLlama's ``l2_supercat`` (MIT: Llama 2's token embeddings distilled for sentence similarity;
32,000 tokens x 256 dimensions, float16), which ships inside the ``wordllama`` wheel with its tokenizer. Its
files are read where the package is installed, and the package itself is never imported: its import sets the
root logger up (``logging.basicConfig`` at INFO), and its loader looks for the tokenizer in a folder the wheel
does not have and then downloads it. The weights are mapped, not read: their pages in memory are the file's,
shared with every process that maps it and dropped under memory pressure.

:func:`fuse` is the fusion: each tool's BM25 score over the best one's, and its cosine between the catalogue's
least and most similar tools, count equally (:data:`BM25_SHARE`).
"""

from __future__ import annotations

import importlib.util
import json
import struct
from collections.abc import Sequence
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
from tokenizers import Tokenizer

from onetool.registry import LocalTool, Tool, UpstreamTool
from onetool.search._words import spelled

__all__ = ["BM25_SHARE", "Model", "ModelMissing", "Vectors", "fuse", "meaning"]

PACKAGE = "wordllama"
"""The PyPI package the model ships in (``pip install onetool[semantic]`` pins its version)."""
WEIGHTS = "weights/l2_supercat_256.safetensors"
TOKENIZER = "tokenizers/l2_supercat_tokenizer_config.json"
TENSOR = "embedding.weight"
BM25_SHARE = 0.5
"""What BM25 counts in a tool's fused score; its cosine counts the rest. Equal, not tuned: on the bench's tasks
recall@5 is the same from 0.4 to 0.5, lower at 0.3 and 0.6."""
DECIMALS = 6
"""A fused score is rounded to this many decimals before ranking, so that equal tools tie (and go by their
rowid, a hash of their name) whatever order the floating-point sums were made in."""
MAX_TOKENS = 256
"""Of a text's tokens, averaged: a hostile query of rare characters is thousands of byte tokens."""
MAX_MEANING_CHARS = 300
"""Of a tool's first sentence, and of its parameters' names, embedded."""

Vector = npt.NDArray[np.float32]


class ModelMissing(Exception):
    """The model's package is not installed, or its files are not where this version of it keeps them."""


class Model:
    """The token embeddings and their tokenizer: a text's vector is the normalised mean of its tokens' rows."""

    def __init__(self, weights: npt.NDArray[np.float16], tokenizer: Tokenizer) -> None:
        self._weights = weights
        self._tokenizer = tokenizer
        self.dimensions = int(weights.shape[1])

    @classmethod
    def load(cls) -> Model:
        """The model from the installed package's files; ModelMissing when they are not there."""
        spec = importlib.util.find_spec(PACKAGE)  # finds the package without importing it
        if spec is None or not spec.submodule_search_locations:
            raise ModelMissing(f"the {PACKAGE!r} package is not installed")
        root = Path(next(iter(spec.submodule_search_locations)))
        weights, tokenizer = root / WEIGHTS, root / TOKENIZER
        for file in (weights, tokenizer):
            if not file.is_file():
                raise ModelMissing(f"{file} is missing: this version of {PACKAGE!r} keeps its model elsewhere")
        return cls(_mapped(weights, TENSOR), Tokenizer.from_file(str(tokenizer)))

    def embed(self, text: str) -> Vector:
        """``text``'s vector (its first MAX_TOKENS tokens), of length 1, or all zeros for a text without a token.
        ``encode``, one text at a time: the tokenizer's batch call starts a thread pool, which complains when
        the process later forks."""
        ids = self._tokenizer.encode(text, add_special_tokens=False).ids[:MAX_TOKENS]
        if not ids:
            return np.zeros(self.dimensions, np.float32)
        mean: Vector = self._weights[ids].mean(axis=0, dtype=np.float32)
        norm = float(np.linalg.norm(mean))
        return mean / norm if norm > 0 else mean

    def mapped_bytes(self) -> int:
        """The size of the weights' mapping (the file's pages, those read in memory)."""
        return int(self._weights.nbytes)


@cache
def shared_model() -> Model:
    """One model per process: every index (the gateway's, a CLI search's, the tests') reads the same pages."""
    return Model.load()


def _mapped(path: Path, tensor: str) -> npt.NDArray[np.float16]:
    """One float16 matrix of a safetensors file, mapped read-only (the format: an 8-byte little-endian header
    length, a JSON header naming each tensor's dtype, shape and byte range, then the bytes)."""
    with path.open("rb") as f:
        (length,) = struct.unpack("<Q", f.read(8))
        header: dict[str, Any] = json.loads(f.read(length))
    entry = header.get(tensor)
    if not isinstance(entry, dict) or entry.get("dtype") != "F16" or len(entry.get("shape", ())) != 2:
        raise ModelMissing(f"{path} has no float16 matrix {tensor!r}: this version of {PACKAGE!r} differs")
    rows, columns = entry["shape"]
    start, end = entry["data_offsets"]
    if end - start != rows * columns * 2:
        raise ModelMissing(f"{path}: {tensor!r} takes {end - start} bytes, not {rows}x{columns} float16")
    return np.memmap(path, dtype=np.float16, mode="r", offset=8 + length + start, shape=(rows, columns))


class Vectors:
    """The vectors of the index's tools, kept by pack (a pack's change re-embeds that pack only) and, for the
    search, stacked in rowid order: the same catalogue is the same matrix, whatever order its packs came in."""

    def __init__(self, model: Model) -> None:
        self.model = model
        self._packs: dict[str, tuple[npt.NDArray[np.int64], Vector]] = {}
        self.rowids: npt.NDArray[np.int64] = np.zeros(0, np.int64)
        """Every tool's rowid, ascending."""
        self._matrix: Vector = np.zeros((0, model.dimensions), np.float32)

    def put(self, pack: str, rows: Sequence[tuple[int, Tool]]) -> None:
        """Embed ``pack``'s tools, each under its rowid."""
        vectors = np.zeros((len(rows), self.model.dimensions), np.float32)
        for i, (_, tool) in enumerate(rows):
            vectors[i] = self.model.embed(meaning(tool))
        self._packs[pack] = (np.array([rowid for rowid, _ in rows], np.int64), vectors)

    def drop(self, pack: str) -> None:
        self._packs.pop(pack, None)

    def stack(self) -> None:
        """Stack the packs' vectors for the search, after the packs changed."""
        if not self._packs:
            self.rowids, self._matrix = np.zeros(0, np.int64), np.zeros((0, self.model.dimensions), np.float32)
            return
        rowids = np.concatenate([rowids for rowids, _ in self._packs.values()])
        order = np.argsort(rowids)
        self.rowids = rowids[order]
        self._matrix = np.concatenate([vectors for _, vectors in self._packs.values()])[order]

    def cosines(self, query: str) -> Vector:
        """Each tool's cosine with ``query``, in :attr:`rowids` order."""
        result: Vector = self._matrix @ self.model.embed(spelled(query))
        return result

    def nbytes(self) -> int:
        """What the tools' vectors take (stacked, and by pack)."""
        return int(self._matrix.nbytes + self.rowids.nbytes) + sum(
            int(r.nbytes + v.nbytes) for r, v in self._packs.values()
        )


def meaning(tool: Tool) -> str:
    """What a tool's vector is made of: its pack, its name, its description's first sentence and its parameters'
    names, as words. The rest of a description says how more than what (the bench finds recall no better with
    it), and a mean over more tokens says less of each."""
    names = " ".join(_param_names(tool))[:MAX_MEANING_CHARS]
    return spelled(f"{tool.pack} {tool.name} {tool.summary[:MAX_MEANING_CHARS]} {names}")


def _param_names(tool: Tool) -> list[str]:
    if isinstance(tool, UpstreamTool):
        return list(tool.schema.properties)
    if isinstance(tool, LocalTool):
        return list(tool.parameters.parameters)
    return []


def fuse(rowids: npt.NDArray[np.int64], cosines: Vector, bm25: dict[int, float]) -> list[int]:
    """Every tool's rowid, best first, by its BM25 score (``bm25``: rowid to score, higher better, for the tools
    the query's words matched) over the best one's, counting :data:`BM25_SHARE`, and its cosine min-max scaled
    over the catalogue, counting the rest."""
    low, high = float(cosines.min()), float(cosines.max())
    fused = (1 - BM25_SHARE) * (cosines - low) / ((high - low) or 1.0)
    if bm25:
        matched = np.fromiter(bm25.keys(), np.int64, len(bm25))
        scores = np.fromiter(bm25.values(), np.float64, len(bm25))
        best = float(scores.max())
        fused[np.searchsorted(rowids, matched)] += BM25_SHARE * scores / (best if best > 0 else 1.0)
    # Best first; among equal (rounded) scores, by rowid.
    order = np.lexsort((rowids, -np.round(fused, DECIMALS)))
    ranked: list[int] = rowids[order].tolist()
    return ranked
