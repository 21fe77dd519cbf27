"""The README's snippets, for the tests that hold them to what they claim."""

from __future__ import annotations

import re
from pathlib import Path

README = Path(__file__).resolve().parent.parent / "README.md"


def readme_snippets(section: str = "Writing snippets") -> list[str]:
    """The ```python blocks of one ``## section`` of the README."""
    text = README.read_text().split(f"\n## {section}\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"\n```python\n(.*?)```", text, flags=re.DOTALL)
