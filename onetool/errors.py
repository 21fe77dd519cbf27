"""One error tree for the gateway.

    OneToolError
    ├── ModelError          the message is meant for the model: it reaches the snippet and the run's result
    │   ├── UnknownPack, UnknownTool, ArgumentError, ToolFailed
    │   ├── ServerHeld      an operator holds the server for review (quarantined or proposed)
    │   └── UpstreamError
    │       ├── UpstreamUnavailable
    │       └── UpstreamTimeout
    ├── ConfigError         the configuration cannot be used (the CLI exits with status 2)
    ├── StateError          the state store cannot be used: corrupt, locked, unreachable, too new (exit status 2)
    │   ├── StoreUnreachable  its server cannot be reached now: `onetool serve --http` waits for it, unready
    │   └── ServerExists    a server of that name was already added at run time
    ├── LostRace            a write over a version another replica changed meanwhile: nothing was written
    ├── ServeError          the gateway cannot serve (port in use, unsafe bind)
    │   └── PortInUse       the port to listen on is taken
    ├── AuthError           an OAuth authorization could not be made
    ├── NotRunning          no gateway answers where its discovery file says (the CLI works without one)
    └── StatusError         ``status`` is the HTTP status it answers (or was answered) with
        ├── ControlError    a control action that cannot be done (400, 404, 409; a lost race carries ``current``)
        ├── AttachError     the running gateway refused the CLI's request
        │   └── SeveralGateways   no config names the gateway, and several run
        └── BridgeError     ``onetool bridge`` refused a request (400 ... 500; a 400 may name the ``field``)
            └── BridgeUnavailable   the bridge cannot be reached, or cannot start the server (503 to the caller)

Inside a snippet a `ModelError` is raised as the sandbox exception its `snippet_type` names (a `ToolError`
subclass), so snippet code can catch a timeout or an unavailable server by type, with its `origin`: "tool" when
the tool itself failed (its error result, its server's error answer, a local pack's exception), "host" when
OneTool decided (names, arguments, availability, timeouts).
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from sandbox.protocol import errors as snippet
from sandbox.protocol.api import RunError
from sandbox.protocol.verdicts import Verdict

__all__ = [
    "ArgumentError",
    "AttachError",
    "AuthError",
    "BridgeError",
    "BridgeUnavailable",
    "ConfigError",
    "ControlError",
    "LostRace",
    "ModelError",
    "NotRunning",
    "OneToolError",
    "PortInUse",
    "RunError",
    "ServeError",
    "ServerExists",
    "ServerHeld",
    "SeveralGateways",
    "StateError",
    "StatusError",
    "StoreUnreachable",
    "ToolFailed",
    "UnknownPack",
    "UnknownTool",
    "UpstreamError",
    "UpstreamTimeout",
    "UpstreamUnavailable",
    "Verdict",
]


class OneToolError(Exception):
    """Every error OneTool raises on purpose."""


class ConfigError(OneToolError):
    """The configuration cannot be used; the message says where and why."""


class StateError(OneToolError):
    """The state store cannot be used; the message names the file or URL (never its password) and what to do."""


class StoreUnreachable(StateError):
    """The state store's server cannot be reached (refused, unresolvable, starting up, full): a gateway serving
    HTTP waits for it, unready, instead of exiting."""


class ServerExists(StateError):
    """`add_server` for a name that was already added at run time: remove it first."""


class LostRace(OneToolError):
    """A write over a version of a server's state that another writer (another replica) changed meanwhile:
    nothing was written. The caller re-reads the current state and shows it (the admin API: 409)."""


class ServeError(OneToolError):
    """A startup problem worth a one-line message: port in use, unsafe bind, ..."""


class PortInUse(ServeError):
    """The port to listen on is taken: the command that chose it says how to choose another."""

    def __init__(self, host: str, port: int) -> None:
        super().__init__(f"port {port} is already in use on {host}")
        self.host = host
        self.port = port


class StatusError(OneToolError):
    """An error whose HTTP status says what kind it is: the API that meets it answers with ``status``."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.message = message
        self.status = status


class ControlError(StatusError):
    """A control action that cannot be done (400 bad spec, 404 unknown, 409 conflict)."""

    def __init__(self, message: str, status: int = 400, current: dict[str, Any] | None = None) -> None:
        super().__init__(message, status)
        self.current = current
        """For a change that lost a race (409): the server as it is now (None: it no longer exists)."""


class AuthError(OneToolError):
    """An OAuth authorization (``onetool auth``, or the gateway's own) could not be made; the message says why and
    what to do."""


class AttachError(StatusError):
    """The running gateway answered the CLI with an error; the message is its own."""


class NotRunning(OneToolError):
    """No gateway answers at the URL (connection refused): the caller falls back to working without one."""


class SeveralGateways(AttachError):
    """No config file names the gateway to use, and several run: the CLI does not guess (status 400)."""

    def __init__(self, message: str) -> None:
        super().__init__(message, 400)


class ModelError(OneToolError):
    """A pack call that cannot be made or failed; the message is meant for the model."""

    snippet_type: ClassVar[type[snippet.ToolError]] = snippet.ToolError
    """The sandbox exception the snippet sees."""
    origin: Literal["host", "tool"] = "host"
    """Who failed the call: OneTool ("host") or the tool ("tool"); the snippet's ToolError carries it."""
    server: str | None = None
    """The configured server the error is about, when it names one."""


class UnknownPack(ModelError):
    snippet_type = snippet.UnknownTool


class UnknownTool(ModelError):
    snippet_type = snippet.UnknownTool


class ArgumentError(ModelError):
    """Arguments that do not fit a tool's schema or signature; the message shows the signature."""

    snippet_type = snippet.ArgumentError


class ServerHeld(ModelError):
    """A call to a server an operator holds for review: quarantined, or proposed and not approved yet. Its tools
    are shown nowhere, and no reconnect changes that; the snippet catches it as ToolUnavailable."""

    snippet_type = snippet.ToolUnavailable

    def __init__(self, server: str, state: str) -> None:
        super().__init__(
            f"server '{server}' is unavailable: held for review by an operator ({state}); its tools are served once "
            "an operator approves it"
        )
        self.server = server


class ToolFailed(ModelError):
    """The tool ran and reported an error (an `isError` result, or a local pack's exception)."""

    origin = "tool"


class UpstreamError(ModelError):
    """An upstream call failed: the upstream answered with a JSON-RPC error or an invalid result (``origin``
    "tool"), or the gateway could not make it ("host")."""

    server: str

    def __init__(
        self, message: str, *, server: str, tool: str | None = None, origin: Literal["host", "tool"] = "tool"
    ) -> None:
        super().__init__(message)
        self.server = server
        self.tool = tool
        self.origin = origin


class UpstreamUnavailable(UpstreamError):
    """The server is disabled, failed to connect, or its connection dropped.

    Unless it is disabled, the pool keeps reconnecting in the background, and the message says so:
    the caller (a model, usually) learns that trying again later is worth it.
    """

    snippet_type = snippet.ToolUnavailable

    def __init__(
        self, server: str, reason: str, *, tool: str | None = None, fix: str | None = None, retrying: bool = True
    ) -> None:
        if fix:
            advice = f"; {fix}"
        elif retrying:
            advice = "; OneTool keeps reconnecting in the background: retry later, or see proxy.list_servers()"
        else:
            advice = ""
        super().__init__(f"server '{server}' is unavailable: {reason}{advice}", server=server, tool=tool, origin="host")
        self.reason = reason


class UpstreamTimeout(UpstreamError):
    """A tool call took longer than its timeout; the upstream was sent notifications/cancelled."""

    snippet_type = snippet.ToolTimeout

    def __init__(self, server: str, call: str, seconds: float) -> None:
        """``call`` names the request as the caller wrote it (``everything.trigger_long_running_operation``)."""
        super().__init__(
            f"{call} timed out after {seconds} s and was cancelled; if it needs longer, raise servers.{server}.timeout",
            server=server,
            tool=call,
            origin="host",
        )
        self.seconds = seconds


class BridgeError(StatusError):
    """On both sides of the bridge: the service answers with ``status``; the gateway's client raises it."""

    def __init__(self, message: str, status: int, *, field: str | None = None) -> None:
        super().__init__(message, status)
        self.field = field
        """For a 400: the request field that was missing or wrong."""


class BridgeUnavailable(BridgeError):
    """Nothing changed: the bridge is unreachable, refused the token, or failed to start the server."""

    def __init__(self, message: str) -> None:
        super().__init__(f"bridge unavailable: {message}", 503)
