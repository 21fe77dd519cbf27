"""The run tool's description: full listing, shortened when the catalogue is large."""

from __future__ import annotations

import inspect

from onetool.describe import describe_run
from onetool.registry import LocalTool, Pack, Registry


def _tool(x: int) -> int:
    return x


def pack(name: str, n: int) -> Pack:
    tools = {
        f"tool_{i}": LocalTool(
            pack=name,
            name=f"tool_{i}",
            description=f"Does thing {i}. More detail here.",
            signature=f"{name}.tool_{i}(x: int)",
            func=_tool,
            parameters=inspect.signature(_tool),
        )
        for i in range(n)
    }
    return Pack(name=name, tools=tools)


def test_small_catalogue_is_listed_in_full() -> None:
    text = describe_run(Registry({"a": pack("a", 3)}))
    assert "  a.tool_1(x: int)  # Does thing 1." in text
    assert "More detail" not in text


def test_large_catalogue_is_shortened_biggest_first() -> None:
    registry = Registry({"big": pack("big", 400), "small": pack("small", 2)})
    text = describe_run(registry, budget=6000)
    assert len(text) <= 6000
    assert "small.tool_1(x: int)  # Does thing 1." in text  # the small pack keeps its detail
    assert "big: 400 tools: tool_0, tool_1" in text
    assert "proxy.list_tools(server='big')" in text


def test_no_packs() -> None:
    assert describe_run(Registry({})).endswith("No packs are available.")
