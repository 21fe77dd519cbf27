"""Whether the index also ranks by meaning (``search.semantic``): the ``semantic`` extra, when it is installed.

Its dependencies (numpy, tokenizers, the model's package) are imported here only when asked for, so that a
gateway without the extra imports none of them and ranks exactly as BM25 alone does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from onetool.config import Semantic
from onetool.errors import ConfigError

if TYPE_CHECKING:
    from onetool.search._semantic import Model

__all__ = ["semantic_model"]

INSTALL = "pip install 'onetool[semantic]'"


def semantic_model(mode: Semantic) -> Model | None:
    """The model ``mode`` asks for: none when off, or (auto) when the extra is not installed. Raises ConfigError
    when it is on and the extra is missing. Loading it takes a few tenths of a second (once per process)."""
    if mode == "off":
        return None
    try:
        from onetool.search._semantic import ModelMissing, shared_model
    except ImportError as e:  # numpy or tokenizers: the extra is not installed
        why = f"{e.name or e} is not installed"
    else:
        try:
            return shared_model()
        except ModelMissing as e:
            why = str(e)
    if mode == "on":
        raise ConfigError(f"search.semantic is on, but {why}: {INSTALL}, or set search.semantic to auto or off")
    return None
