"""The operator's face, ``/admin``: the control plane's JSON API, and OAuth logins run by the gateway."""

from onetool.serve.admin._oauth import Logins, authorize_routes, callback_routes, running_logins
from onetool.serve.admin._routes import ACTOR_HEADER, admin_routes, json_endpoint, request_actor

__all__ = [
    "ACTOR_HEADER",
    "Logins",
    "admin_routes",
    "authorize_routes",
    "callback_routes",
    "json_endpoint",
    "request_actor",
    "running_logins",
]
