"""Finding tools by what they do: the index every face searches (``proxy.search``, ``search_tools`` on
/mcp/direct, ``inspect(query=...)``, ``onetool tools --search``, the admin API and the console); by meaning too
with the ``semantic`` extra (:func:`semantic_model`)."""

from typing import TYPE_CHECKING

from onetool.lazy import lazy_exports
from onetool.search._extra import semantic_model
from onetool.search._index import DEFAULT_LIMIT, MAX_LIMIT, MAX_QUERY_CHARS, Hit, ToolIndex, Visible, query_terms

if TYPE_CHECKING:
    from onetool.search._semantic import Model
else:  # numpy and tokenizers: imported only when the extra is asked for
    __getattr__ = lazy_exports(__name__, {"Model": "_semantic"})

__all__ = [
    "DEFAULT_LIMIT",
    "MAX_LIMIT",
    "MAX_QUERY_CHARS",
    "Hit",
    "Model",
    "ToolIndex",
    "Visible",
    "query_terms",
    "semantic_model",
]
