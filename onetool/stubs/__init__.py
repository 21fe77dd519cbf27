"""A typed Python module of every pack the ``run`` face sees: ``GET /runtime/tools.py`` and ``onetool stubs``.

An agent's editor or a human type-checks a snippet against it before sending it: one class per pack, a method
per tool under the name a snippet uses, parameters and returns typed from the tools' JSON schemas (upstream) or
Python signatures (local packs), and an instance per pack (``time: Time``).

expressions.py  schemas and annotations as type expressions; the TypedDicts they need
module.py       the module's text
select.py       ``?filter=``: which packs and tools
"""

from onetool.stubs._module import tools_module
from onetool.stubs._select import parse_filter, select

__all__ = ["parse_filter", "select", "tools_module"]
