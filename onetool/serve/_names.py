"""Names of upstream items as a face lists them: ``server<separator>name``, within MCP's name charset and length.

The direct face names upstream tools this way, and every face names upstream prompts so (one scheme, not two).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

from onetool.text import mcp_name

__all__ = ["MAX_NAME", "namespaced"]

MAX_NAME = 64
"""Longest tool name: some clients check names against ``^[a-zA-Z0-9_-]{1,64}$``."""
_HASH_CHARS = 8
"""Hex digits of the hash that keeps a shortened name unique: 32 bits."""


def namespaced(
    tools: Iterable[tuple[str, str]], separator: str, reserved: Iterable[str] = ()
) -> dict[str, tuple[str, str]]:
    """Each namespaced name -> its (server, upstream name); names are unique and at most MAX_NAME long.

    A tool is ``server + separator + tool``, each part as :func:`onetool.text.mcp_name` makes it (within MCP's
    tool-name charset), when that fits and no earlier tool (or reserved name) has it; otherwise it is that name cut
    short plus ``_`` and a hash of the full name, so the same tool keeps the same name from one listing to the next.
    """
    pairs = list(dict.fromkeys(tools))  # an upstream that lists a name twice has one tool of that name
    full = [f"{mcp_name(server)}{separator}{mcp_name(tool)}" for server, tool in pairs]
    taken = set(reserved)
    chosen: list[str | None] = []
    for name in full:
        fits = len(name) <= MAX_NAME and name not in taken
        chosen.append(name if fits else None)
        if fits:
            taken.add(name)
    out: dict[str, tuple[str, str]] = {}
    for pair, name, picked in zip(pairs, full, chosen, strict=True):
        if picked is None:
            picked = _shortened(name, taken)
            taken.add(picked)
        out[picked] = pair
    return out


def _shortened(name: str, taken: set[str]) -> str:
    attempt = 0
    while True:
        digest = hashlib.sha256(f"{name}\0{attempt}".encode()).hexdigest()[:_HASH_CHARS]
        candidate = f"{name[: MAX_NAME - _HASH_CHARS - 1]}_{digest}"
        if candidate not in taken:
            return candidate
        # Another name holds it by a 32-bit collision, or on purpose: the next attempt hashes differently.
        attempt += 1
