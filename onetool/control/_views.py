"""What the control plane hands out: one server as operators see it, a held tool, and its error."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from onetool.config import ServerConfig, ToolFilter
from onetool.text import visible

if TYPE_CHECKING:
    from mcp import types

    from onetool.upstream.status import ServerStatus

HeldReason = Literal["server quarantined", "changed after approval"]
FROM_CONFIG = "config"
"""Who added a server of the config file (``ServerView.added_by``)."""
PROPOSED = "proposed"
"""The status of a server a model proposed: nothing runs it until an operator approves it."""


@dataclass(frozen=True)
class ServerView:
    """One server as operators see it (admin API, CLI, /status, the upstream_servers tool)."""

    name: str
    pack: str
    type: str
    status: str
    """A ServerState value, "quarantined" for an enabled server whose tools await approval, or PROPOSED."""
    enabled: bool
    quarantined: bool
    error: str | None
    detail: str | None
    """The operator's view of the error (an upstream's stderr line): never for an MCP client."""
    fix: str | None
    tool_count: int
    held_tools: list[str] = field(default_factory=list)
    """Tools changed (or new) after approval, awaiting approval again."""
    protocol_version: str | None = None
    instructions: str | None = None
    added_by: str = FROM_CONFIG
    """FROM_CONFIG for a config-file server, else the actor that added it."""
    oauth_status: str | None = None
    """For an OAuth server: authenticated, pending_authorization or authentication_failed."""
    converted_to: str | None = None
    """For a stdio server the bridge serves (``onetool servers convert``): the URL the gateway connects."""
    unresponsive: str | None = None
    """Set while the server's calls fail at once because they kept timing out: why, and when it is tried again."""
    calls_in_flight: int = 0
    """Requests on the server now, of at most servers.NAME.max_concurrent_calls."""
    launch: dict[str, Any] | None = None
    """For a proposed server, and in the answer to approving one: what approving it runs (see :func:`launch`)."""
    stderr: list[str] = field(default_factory=list)
    """A stdio server's last stderr lines (bounded, escaped): never for an MCP client, they may hold secrets."""
    tools_filter: dict[str, Any] | None = None
    """Which of its tools are offered, when not all: ``{"allow", "deny", "from"}``, from "entry" (the config
    file's, or an added server's) or "run time" (``onetool servers tools``)."""

    def to_dict(self) -> dict[str, Any]:
        """Everything, for the admin API and the CLI; ``oauth_status`` only for an OAuth server."""
        data = asdict(self)
        if data["oauth_status"] is None:
            del data["oauth_status"]
        return data

    def public(self) -> dict[str, Any]:
        """JSON-able, without ``detail`` and ``stderr``: for anything an MCP client sees."""
        data = self.to_dict()
        del data["detail"], data["stderr"]
        return data


@dataclass(frozen=True)
class HeldTool:
    """A tool no face shows until an admin approves it, with what the admin needs to review it."""

    server: str
    tool: str
    reason: HeldReason
    description: str
    input_schema: dict[str, Any]
    diff: str | None
    """For a changed tool: a unified diff from the approved definition (from nothing for a new tool)."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def tools_filter(offered: ToolFilter, *, set_at_run_time: bool) -> dict[str, Any] | None:
    """A server's tools filter as :class:`ServerView` shows it; None when every tool is offered by default."""
    if not set_at_run_time and offered.allow is None and not offered.deny:
        return None
    return {**offered.model_dump(mode="json"), "from": "run time" if set_at_run_time else "entry"}


EXECUTION_ENV: dict[str, str] = {
    "PATH": "chooses the program each command name runs",
    "LD_*": "the dynamic loader: LD_PRELOAD and LD_AUDIT load a library into every program, LD_LIBRARY_PATH "
    "chooses the libraries they load",
    "DYLD_*": "the macOS loader: DYLD_INSERT_LIBRARIES loads a library into every program",
    "GCONV_PATH": "loads character-set modules (code) into programs that convert text",
    "BASH_ENV": "a script bash runs before every script",
    "ENV": "a script sh runs at start",
    "SHELL": "the shell programs start commands with",
    "IFS": "how the shell splits words",
    "HOME": "where programs read their configuration and startup files (.npmrc, .bashrc, pip.conf, .gitconfig)",
    "XDG_CONFIG_HOME": "where programs read their configuration",
    "NODE_OPTIONS": "options of every Node.js process (--require, --import run code first)",
    "NODE_PATH": "where Node.js finds modules",
    "npm_config_*": "npm's settings: the registry packages come from, scripts that run, the shell",
    "YARN_*": "yarn's settings: the registry packages come from",
    "PYTHONPATH": "where Python finds modules: one there runs in place of the real one",
    "PYTHONHOME": "which Python installation runs",
    "PYTHONSTARTUP": "a script Python runs at start",
    "PYTHONUSERBASE": "where Python finds user site-packages",
    "PYTHONBREAKPOINT": "the function breakpoint() calls",
    "PYTHONEXECUTABLE": "which program Python says it is",
    "PIP_*": "pip's settings: the index packages come from",
    "UV_*": "uv's settings (uvx): the index packages come from, which Python runs",
    "PERL5LIB": "where Perl finds modules",
    "PERL5OPT": "options of every Perl process (-M runs a module first)",
    "PERLLIB": "where Perl finds modules",
    "RUBYOPT": "options of every Ruby process (-r loads a file first)",
    "RUBYLIB": "where Ruby finds libraries",
    "JAVA_TOOL_OPTIONS": "options of every Java process (-javaagent runs code first)",
    "JDK_JAVA_OPTIONS": "options of every Java process",
    "_JAVA_OPTIONS": "options of every Java process",
    "CLASSPATH": "where Java finds classes",
    "GIT_*": "git's settings: GIT_SSH_COMMAND runs a command, GIT_EXEC_PATH chooses git's own programs",
    "HTTP_PROXY": "sends the server's downloads (npx, uvx packages) through another host",
    "HTTPS_PROXY": "sends the server's downloads (npx, uvx packages) through another host",
    "ALL_PROXY": "sends the server's downloads through another host",
    "NO_PROXY": "which hosts bypass the proxy",
    "SSL_CERT_FILE": "which TLS certificates are trusted: a download can come from another server",
    "SSL_CERT_DIR": "which TLS certificates are trusted: a download can come from another server",
    "REQUESTS_CA_BUNDLE": "which TLS certificates Python's requests trusts",
    "CURL_CA_BUNDLE": "which TLS certificates curl trusts",
    "NODE_EXTRA_CA_CERTS": "more TLS certificates Node.js trusts: a download can come from another server",
    "NODE_TLS_REJECT_UNAUTHORIZED": "0 turns off Node.js's TLS certificate checks",
}
"""Environment variables that change what a stdio server runs, not only how it behaves: each is flagged, with why,
wherever a server's launch is shown (a reviewer approving a proposal must not miss one). ``*`` ends a prefix. Names
are compared in any case (``npm_config_*`` and ``NPM_CONFIG_*`` are both npm's). The one list: add names here."""

_EXACT = {key.upper(): why for key, why in EXECUTION_ENV.items() if not key.endswith("*")}
_PREFIXES = tuple((key[:-1].upper(), why) for key, why in EXECUTION_ENV.items() if key.endswith("*"))


def changes_what_runs(key: str) -> str | None:
    """Why the environment variable ``key`` changes what a server runs (:data:`EXECUTION_ENV`); None if it does not."""
    upper = key.upper()
    return _EXACT.get(upper) or next((why for prefix, why in _PREFIXES if upper.startswith(prefix)), None)


def launch(config: ServerConfig, *, values: bool = False) -> dict[str, Any]:
    """Exactly what connecting ``config`` starts or opens, for an operator to approve: the command, its arguments,
    working folder and environment variable names, or the URL, transport and header names; the environment variables
    that change what runs (``flagged_env``: key and why). With ``values`` (a model's proposal, whose values a model
    wrote: no operator secret is among them), the env and header values too (``env``, ``headers``); never otherwise,
    as an operator's may be secrets. Every text with the characters a reader would not see named."""
    if config.command is not None:
        flagged = [
            {"key": visible(k, keep=""), "why": why} for k in sorted(config.env) if (why := changes_what_runs(k))
        ]
        shown: dict[str, Any] = {
            "command": visible(config.command, keep=""),
            "args": [visible(a, keep="") for a in config.args],
            "cwd": visible(str(config.cwd), keep="") if config.cwd is not None else None,
            "env_keys": [visible(k, keep="") for k in sorted(config.env)],
            "flagged_env": flagged,
        }
        if values:
            shown["env"] = _shown_values(config.env)
        return shown
    shown = {
        "url": visible(config.url or "", keep=""),
        "type": config.transport,
        "header_keys": [visible(k, keep="") for k in sorted(config.headers)],
    }
    if values:
        shown["headers"] = _shown_values(config.headers)
    return shown


def _shown_values(values: dict[str, str]) -> dict[str, str]:
    return {visible(k, keep=""): visible(v, keep="") for k, v in sorted(values.items())}


def shown_status(st: ServerStatus, *, quarantined: bool) -> str:
    """What a server's view says it is: "quarantined" for an enabled server whose tools await approval."""
    if quarantined:
        return "quarantined"
    return "unresponsive" if st.unresponsive else str(st.status)


def quarantined_tool(server: str, tool: types.Tool) -> HeldTool:
    """A tool of a quarantined server, as review shows it: held with the whole server."""
    return HeldTool(
        server=server,
        tool=tool.name,
        reason="server quarantined",
        description=tool.description or "",
        input_schema=dict(tool.input_schema),
        diff=None,
    )
