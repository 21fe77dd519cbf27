"""Finding tools by what they do: the index every face searches (``proxy.search``, ``search_tools`` on
/mcp/direct, ``inspect(query=...)``, ``onetool tools --search``, the admin API and the console)."""

from onetool.search._index import DEFAULT_LIMIT, MAX_LIMIT, MAX_QUERY_CHARS, Hit, ToolIndex, Visible

__all__ = ["DEFAULT_LIMIT", "MAX_LIMIT", "MAX_QUERY_CHARS", "Hit", "ToolIndex", "Visible"]
