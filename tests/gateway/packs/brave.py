"""A local pack that collides with the server configured as `brave` (server-everything)."""


def echo(message: str) -> str:
    """Local echo: wins over the upstream tool of the same name."""
    return f"local echo: {message}"


async def web_search(query: str, count: int = 3) -> list[dict]:
    """An async local tool."""
    return [{"title": f"{query} #{i}", "rank": i} for i in range(1, count + 1)]
