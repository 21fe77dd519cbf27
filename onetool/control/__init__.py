"""The control plane: servers added, removed, enabled, quarantined and approved while the gateway runs.

Names load lazily, so the CLI can read the table of verbs (:mod:`onetool.control.actions`) without loading the
control plane itself.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from onetool.lazy import lazy_exports

if TYPE_CHECKING:
    from onetool.control._server import ServerControl
    from onetool.control._views import EXECUTION_ENV, HeldTool, ServerView, changes_what_runs

_EXPORTS = {
    "ServerControl": "_server",
    "EXECUTION_ENV": "_views",
    "HeldTool": "_views",
    "ServerView": "_views",
    "changes_what_runs": "_views",
}

__all__ = ["EXECUTION_ENV", "HeldTool", "ServerControl", "ServerView", "changes_what_runs"]

__getattr__ = lazy_exports(__name__, _EXPORTS)
