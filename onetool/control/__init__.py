"""The control plane: servers added, removed, enabled, quarantined and approved while the gateway runs."""

from onetool.control._server import ServerControl
from onetool.control._views import HeldTool, ServerView

__all__ = ["HeldTool", "ServerControl", "ServerView"]
