"""The control plane: servers added, removed, enabled, quarantined and approved while the gateway runs."""

from onetool.control.server import ServerControl
from onetool.control.views import HeldTool, ServerView

__all__ = ["HeldTool", "ServerControl", "ServerView"]
