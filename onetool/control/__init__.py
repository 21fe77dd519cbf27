"""The control plane: servers added, removed, enabled, quarantined and approved while the gateway runs."""

from onetool.control.server import ServerControl
from onetool.control.views import ControlError, HeldTool, ServerView

__all__ = ["ControlError", "HeldTool", "ServerControl", "ServerView"]
