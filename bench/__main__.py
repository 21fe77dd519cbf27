"""`make bench`: run every bench module and print one table.

Each ``bench/*_bench.py`` module has ``async def run() -> list[Row]``.
"""

from __future__ import annotations

import importlib
import os
import pkgutil
import sys
import tempfile
from pathlib import Path

import anyio

from bench import Row


async def main(only: list[str]) -> None:
    rows: list[Row] = []
    here = Path(__file__).parent
    for mod in sorted(m.name for m in pkgutil.iter_modules([str(here)]) if m.name.endswith("_bench")):
        if only and not any(o in mod for o in only):
            continue
        print(f"running {mod} ...", file=sys.stderr, flush=True)
        rows.extend(await importlib.import_module(f"bench.{mod}").run())
    widths = [max(len(r[i]) for r in [Row("area", "measure", "value", "target"), *rows]) for i in range(4)]
    header = Row("area", "measure", "value", "target")
    for i, row in enumerate([header, *rows]):
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip())
        if i == 0:
            print("  ".join("-" * w for w in widths))


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as home:
        # Gateways started here keep their state store and discovery file here, not in the user's folders.
        os.environ["ONETOOL_STATE_DIR"], os.environ["ONETOOL_RUNTIME_DIR"] = f"{home}/state", f"{home}/run"
        anyio.run(main, sys.argv[1:])
