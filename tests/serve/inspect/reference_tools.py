"""The reference servers' real tool lists, as dumped by tests/fixtures/dump_reference_tools.py."""

from __future__ import annotations

import json
from typing import Any

from tests.conftest import FIXTURES

REFERENCE_TOOLS: dict[str, Any] = json.loads((FIXTURES / "reference_tools.json").read_text())


def reference_tool(server: str, name: str) -> dict[str, Any]:
    return next(t for t in REFERENCE_TOOLS[server]["tools"] if t["name"] == name)
