"""The control plane: servers added, removed, enabled, quarantined and approved while the gateway runs."""

from onetool.control._server import ServerControl
from onetool.control._views import EXECUTION_ENV, HeldTool, ServerView, changes_what_runs

__all__ = ["EXECUTION_ENV", "HeldTool", "ServerControl", "ServerView", "changes_what_runs"]
