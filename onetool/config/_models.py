"""The config's strict pydantic models: every key of onetool.yaml, its type and default."""

from __future__ import annotations

import fnmatch
import keyword
import os
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ByteSize, ConfigDict, Field, PrivateAttr, field_validator, model_validator

from onetool.errors import ConfigError
from onetool.hosts import plain_http_host
from onetool.logs import DEFAULT_RETENTION, DEFAULT_ROTATION
from onetool.state.paths import project_database

ENV_BRIDGE_URL = "ONETOOL_BRIDGE_URL"
ENV_BRIDGE_TOKEN = "ONETOOL_BRIDGE_TOKEN"
DEFAULT_MAX_DESCRIPTION_LEN = 80
"""Property descriptions the inspect face keeps by default: the first sentence or two of a typical upstream
description."""

TransportName = Literal["stdio", "http", "sse"]
"""How the gateway reaches a server: a child process, streamable HTTP, or SSE."""

_VAR = re.compile(r"\$(\$)?\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")
_NOT_IDENT = re.compile(r"[^0-9A-Za-z_]")


def to_identifier(name: str) -> str:
    """Turn a server or tool name into a Python identifier.

    ``github-api`` -> ``github_api``, ``123server`` -> ``_123server``,
    ``class`` -> ``class_``.
    """
    ident = _NOT_IDENT.sub("_", name)
    if not ident or ident[0].isdigit():
        ident = "_" + ident
    if keyword.iskeyword(ident):
        ident += "_"
    return ident


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def _plain_http_refused(url: str | None, allow_key: str) -> str | None:
    """Why ``url`` may not be used without ``allow_key``: plain http to another host (no silent upgrade to https,
    which would fail against a server that speaks only http, and no silent plain text either). Names the host only:
    the rest of a URL may hold credentials."""
    host = plain_http_host(url) if url else None
    if host is None:
        return None
    return (
        f"plain http:// to {host or 'a URL without a host'} sends tokens and data unencrypted: use https://, "
        f"or set {allow_key}: true if the network to it is trusted"
    )


class ToolFilter(_Strict):
    """Which of a server's tools OneTool offers: names or glob patterns (``*``, ``?``, ``[...]``) of its tools as
    the server names them. Every face, ``proxy.*`` and the typed module see only those."""

    allow: list[str] | None = Field(default=None, description="only these (default: every tool)")
    deny: list[str] = Field(default_factory=list, description="never these, even when allow names them")

    def permits(self, tool: str) -> bool:
        if any(fnmatch.fnmatchcase(tool, pattern) for pattern in self.deny):
            return False
        return self.allow is None or any(fnmatch.fnmatchcase(tool, pattern) for pattern in self.allow)


OAuthGrant = Literal["authorization_code", "client_credentials", "jwt_bearer", "token_exchange"]
"""How OneTool obtains an upstream's tokens: a user in a browser, or a machine credential (its own client secret or
key, a workload identity token, a token to exchange)."""
ClientAuth = Literal["client_secret_basic", "client_secret_post", "private_key_jwt", "none"]
"""How OneTool authenticates itself at the token endpoint (RFC 6749 2.3, RFC 7523 2.2)."""
MACHINE_GRANTS: tuple[OAuthGrant, ...] = ("client_credentials", "jwt_bearer", "token_exchange")
TOKEN_TYPE_JWT = "urn:ietf:params:oauth:token-type:jwt"


class IdentityProvider(_Strict):
    """Enterprise-managed authorization (SEP-990, cross-app access): the enterprise identity provider exchanges the
    user's ID token for an identity assertion grant (ID-JAG, RFC 8693), which grant jwt_bearer presents to the MCP
    server's authorization server."""

    token_endpoint: str = Field(description="the identity provider's token endpoint")
    id_token_file: Path = Field(description="the file holding the ID token to exchange, read at each grant")
    client_id: str | None = Field(default=None, description="OneTool's client at the identity provider")
    client_secret: str | None = Field(default=None, repr=False)

    @model_validator(mode="after")
    def _safe(self) -> IdentityProvider:
        if urlsplit(self.token_endpoint).scheme not in ("http", "https"):
            raise ValueError(f"token_endpoint must be an http(s) URL, got '{self.token_endpoint}'")
        if (host := plain_http_host(self.token_endpoint)) is not None:  # loopback may be plain http (tests, agents)
            raise ValueError(
                f"token_endpoint: plain http:// to {host or 'a URL without a host'} sends the ID token unencrypted:"
                " use https://"
            )
        if self.client_secret is not None and self.client_id is None:
            raise ValueError("client_secret needs client_id")
        return self


class OAuthConfig(_Strict):
    """OAuth 2.1 for an HTTP server; every key is optional (discovery and dynamic registration fill the rest)."""

    grant: OAuthGrant | None = Field(
        default=None,
        description="default: client_credentials given a private key, or a client_secret and no browser; else"
        " authorization_code",
    )
    client_id: str | None = Field(default=None, description="a pre-registered client (default: register dynamically)")
    client_secret: str | None = Field(default=None, repr=False)
    client_auth: ClientAuth | None = Field(
        default=None,
        description="default: private_key_jwt given a private key; given a client_secret, client_secret_post for"
        " authorization_code and client_secret_basic for the other grants; else none",
    )
    private_key_file: Path | None = Field(
        default=None, description="PEM private key signing the client assertions of client_auth private_key_jwt"
    )
    private_key_env: str | None = Field(
        default=None, description="the environment variable holding that PEM key (instead of private_key_file)"
    )
    signing_algorithm: Literal["RS256", "RS384", "RS512", "PS256", "ES256", "ES384", "EdDSA"] = Field(
        default="RS256", description="the JWS algorithm of the client assertions; it must fit the key"
    )
    assertion_file: Path | None = Field(
        default=None,
        description="grant jwt_bearer: the file holding the JWT to present (a workload identity token), read at each"
        " grant",
    )
    identity_provider: IdentityProvider | None = Field(
        default=None,
        description="grant jwt_bearer: obtain the assertion from this enterprise identity provider (SEP-990) instead"
        " of assertion_file",
    )
    subject_token_file: Path | None = Field(
        default=None, description="grant token_exchange: the file holding the token to exchange, read at each grant"
    )
    subject_token_type: str = Field(default=TOKEN_TYPE_JWT, description="grant token_exchange: its RFC 8693 type")
    audience: str | None = Field(default=None, description="grant token_exchange: the audience to ask a token for")
    scopes: list[str] = Field(default_factory=list, description="scopes to request (default: what the server asks)")
    redirect_uri: str | None = Field(
        default=None, description="where the authorization server sends the browser back (default: a loopback port)"
    )
    issuer: str | None = Field(
        default=None, description="the authorization server the client credentials belong to; sent nowhere else"
    )
    store: Literal["state", "keyring"] = Field(
        default="state",
        description="where its tokens live: the state store (shared by replicas), or the OS keyring of this user",
    )
    dpop: bool = Field(
        default=False,
        description="bind its tokens to a key of OneTool's (RFC 9449 DPoP): a proof with every token request and"
        " every request to the server",
    )

    @property
    def has_private_key(self) -> bool:
        return self.private_key_file is not None or self.private_key_env is not None

    @property
    def token_auth(self) -> ClientAuth:
        """The configured client_auth, else the one the credentials given imply."""
        if self.client_auth is not None:
            return self.client_auth
        if self.has_private_key:
            return "private_key_jwt"
        if self.client_secret is None:
            return "none"
        return "client_secret_post" if self.grant in (None, "authorization_code") else "client_secret_basic"

    def relative_to(self, base: Path) -> OAuthConfig:
        """The files it names, relative to the config file's folder rather than the current directory."""
        keys = ("private_key_file", "assertion_file", "subject_token_file")
        found: dict[str, object] = {k: base / v for k in keys if (v := getattr(self, k)) is not None}
        if (idp := self.identity_provider) is not None:
            found["identity_provider"] = idp.model_copy(update={"id_token_file": base / idp.id_token_file})
        return self.model_copy(update=found) if found else self

    @model_validator(mode="after")
    def _complete(self) -> OAuthConfig:
        if problems := list(self._problems()):
            raise ValueError("; ".join(problems))
        if self.redirect_uri is not None and urlsplit(self.redirect_uri).scheme not in ("http", "https"):
            raise ValueError(f"redirect_uri must be an http(s) URL, got '{self.redirect_uri}'")
        return self

    def _problems(self) -> Iterator[str]:
        """What a half-filled block lacks, or holds that no flow it selects uses: each names the key and the flow."""
        grant, auth = self.grant, self.token_auth
        if self.private_key_file is not None and self.private_key_env is not None:
            yield "give private_key_file or private_key_env, not both"
        if self.client_secret is not None and self.client_id is None:
            yield "client_secret needs client_id"
        if self.client_secret is not None and self.has_private_key:
            yield (
                "give client_secret (client_auth client_secret_basic or _post) or a private key (private_key_jwt),"
                " not both"
            )
        if auth in ("client_secret_basic", "client_secret_post") and self.client_secret is None:
            yield f"client_auth {auth} needs client_secret (and client_id)"
        if auth == "private_key_jwt":
            if self.client_id is None:
                yield "client_auth private_key_jwt needs client_id (the client the key is registered for)"
            if not self.has_private_key:
                yield "client_auth private_key_jwt needs private_key_file or private_key_env"
            if grant == "authorization_code":
                yield (
                    "client_auth private_key_jwt is for the grants without a browser (client_credentials, jwt_bearer,"
                    " token_exchange); grant authorization_code authenticates with a client_secret or none"
                )
        elif self.has_private_key:
            yield f"a private key is only used by client_auth private_key_jwt, and client_auth is {auth}"
        elif "signing_algorithm" in self.model_fields_set:
            yield f"signing_algorithm is only used by client_auth private_key_jwt, and client_auth is {auth}"
        if auth == "none" and self.client_secret is not None:
            yield "client_auth none sends no client_secret: remove it, or choose client_secret_basic or _post"
        if grant in MACHINE_GRANTS and self.client_id is None:
            yield f"grant {grant} needs client_id (the client registered at the authorization server)"
        if grant == "client_credentials" and auth == "none":
            yield (
                "grant client_credentials needs a client credential: client_secret, or private_key_file or"
                " private_key_env (client_auth private_key_jwt)"
            )
        if grant == "jwt_bearer" and (self.assertion_file is None) == (self.identity_provider is None):
            yield (
                "grant jwt_bearer needs assertion_file (the file holding the JWT to present) or identity_provider"
                " (which issues it), one of them"
            )
        if grant == "token_exchange" and self.subject_token_file is None:
            yield "grant token_exchange needs subject_token_file (the file holding the token to exchange)"
        for key in ("assertion_file", "identity_provider"):
            if getattr(self, key) is not None and grant != "jwt_bearer":
                yield f"{key} is only used by grant jwt_bearer; set grant: jwt_bearer"
        for key in ("subject_token_file", "subject_token_type", "audience"):
            if key in self.model_fields_set and grant != "token_exchange":
                yield f"{key} is only used by grant token_exchange; set grant: token_exchange"
        if self.redirect_uri is not None and grant in MACHINE_GRANTS:
            yield f"redirect_uri is only used by grant authorization_code, and grant is {grant}"


class ServerConfig(_Strict):
    """One upstream MCP server: stdio (``command``) or HTTP (``url``)."""

    command: str | None = None
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict, repr=False)
    cwd: Path | None = None

    url: str | None = None
    headers: dict[str, str] = Field(default_factory=dict, repr=False)
    type: TransportName | None = Field(
        default=None, description="stdio (implied by command), http (streamable HTTP, the default for url) or sse"
    )
    oauth: OAuthConfig | None = None
    tools: ToolFilter = Field(default_factory=ToolFilter, description="which of its tools to offer (allow, deny)")
    allow_http: bool = Field(
        default=False,
        description="connect to a plain http:// url on a host that is not loopback (logged as a warning at start)",
    )

    timeout: float = Field(default=30.0, gt=0, description="seconds per tool call")
    connect_timeout: float = Field(default=20.0, gt=0, description="seconds to connect and list tools")
    max_concurrent_calls: int = Field(
        default=16, ge=1, description="calls in flight to this server; more wait up to 1 s, then fail (ToolUnavailable)"
    )
    max_backoff: float = Field(default=10.0, gt=0, description="seconds, the longest pause between reconnect attempts")
    max_message_mb: int = Field(
        default=64,
        ge=1,
        description="megabytes of one message from this server: a longer one ends the connection (a snippet can ask "
        "for replies, and the gateway holds each one whole), which is then made again",
    )
    max_argument_mb: float = Field(
        default=4,
        gt=0,
        description="megabytes of one call's arguments as JSON: a larger call is refused before it is sent (one "
        "upstream serves every client, and a run must not hold it up for them with data it has to parse and check)",
    )
    protocol: Literal["auto", "2025-11-25"] = Field(
        default="auto",
        description="the MCP protocol era to speak with it: auto (the newest both speak: 2026-07-28 when it does), or "
        "2025-11-25 (the initialize handshake), for a server whose tools ask their client mid-call by a request of "
        "their own, which 2026-07-28 connections do not carry (FastMCP's ctx.elicit)",
    )
    unattended_elicitation: Literal["decline", "defaults"] = Field(
        default="decline",
        description="what this server's question gets when no user can be asked: decline, or (defaults) a form "
        "whose every field has a default is accepted with them (SEP-1034)",
    )
    sampling: Literal["forward", "deny"] | None = Field(
        default=None,
        description="its sampling/createMessage requests: forward (to the client of the call they come during, "
        "within the run's sampling: bounds) or deny (the protocol's error); default: forward for a server of the "
        "config file, deny for one added at run time",
    )
    enabled: bool = True
    quarantined: bool = Field(
        default=False, description="connect and read its tools, but show and call none until an admin approves it"
    )

    _unset_vars: tuple[str, ...] = PrivateAttr(default=())

    @model_validator(mode="after")
    def _one_transport(self) -> ServerConfig:
        if self.command is None and self.url is None:
            raise ValueError("give 'command' (a stdio server) or 'url' (an HTTP server)")
        if self.command is not None and self.url is not None:
            raise ValueError("give either 'command' (a stdio server) or 'url' (an HTTP server), not both")
        stray: list[str]
        if self.command is not None:
            stray = [k for k in ("headers", "oauth", "allow_http") if k in self.model_fields_set]
            stray += ["type"] if self.type not in (None, "stdio") else []
        else:
            stray = [k for k in ("args", "env", "cwd") if k in self.model_fields_set]
            stray += ["type"] if self.type == "stdio" else []
        if stray:
            kind = "stdio ('command')" if self.command is not None else "HTTP ('url')"
            what = f"type: {self.type}" if stray == ["type"] else ", ".join(stray)
            raise ValueError(f"{what} cannot be used with a {kind} server")
        if not self.allow_http and (refused := _plain_http_refused(self.url, "allow_http")):
            raise ValueError(f"url: {refused}")
        return self

    @property
    def max_message_bytes(self) -> int:
        return self.max_message_mb * 1024 * 1024

    @property
    def max_argument_bytes(self) -> int:
        return int(self.max_argument_mb * 1024 * 1024)

    @property
    def transport(self) -> TransportName:
        if self.command is not None:
            return "stdio"
        return self.type or "http"

    @property
    def unset_vars(self) -> tuple[str, ...]:
        """The environment variables this server's entry names that were not set when the config was loaded: its
        entry is not usable (an enabled one fails alone; a disabled one cannot be enabled) until they are set and
        the config is read again."""
        return self._unset_vars

    def with_unset_vars(self, names: tuple[str, ...]) -> ServerConfig:
        copy = self.model_copy()
        copy._unset_vars = names
        return copy


class PacksConfig(_Strict):
    dirs: list[Path] = Field(default_factory=list, description="extra local pack folders")


class SandboxConfig(_Strict):
    """Limits of one run; the sandbox's error messages name these keys."""

    timeout: float = Field(default=30.0, gt=0, description="wall clock per run, seconds")
    cpu_seconds: float | None = Field(default=None, gt=0, description="CPU time per run (default: the timeout)")
    memory_mb: int = Field(default=256, ge=32)
    max_calls: int = Field(default=200, ge=0, description="pack calls per run")
    max_output: int = Field(
        default=40_000, ge=1_000, description="characters of result text and of printed output; the rest is cut"
    )
    max_message: int = Field(
        default=8 * 1024 * 1024, ge=64 * 1024, description="bytes of one call's arguments or result inside a run"
    )
    max_recursion: int = Field(default=500, ge=50, description="nested Python calls a snippet may make")
    max_concurrent_runs: int | None = Field(
        default=None,
        ge=1,
        description="runs computing at once (one waiting on pack calls lends its slot; default: twice the core count)",
    )
    max_workers: int | None = Field(
        default=None,
        ge=1,
        description="runs holding a worker, computing or waiting on pack calls (default: 4 x max_concurrent_runs)",
    )
    max_host_memory_mb: int = Field(
        default=256, ge=16, description="gateway memory all runs' data may take at once; more waits or fails"
    )


class HttpConfig(_Strict):
    token: str | None = Field(default=None, repr=False, description="bearer token clients must send")
    admin_token: str | None = Field(
        default=None,
        repr=False,
        description="bearer token for /admin (default: $ONETOOL_ADMIN_TOKEN, else one generated at start)",
    )
    enable_inspect_endpoint: bool = Field(default=False, description="serve the inspect/exec face at /mcp/inspect")
    enable_direct_endpoint: bool = Field(
        default=False, description="serve /mcp/direct: every upstream tool as server:tool, plus management tools"
    )
    direct_separator: Literal[":", "__", "."] = Field(
        default=":",
        description="between server and tool names on /mcp/direct; '__' or '.' for clients that reject ':'",
    )
    allowed_hosts: list[str] = Field(
        default_factory=list,
        description="Host headers (name:port) accepted besides loopback names, e.g. a reverse proxy's; "
        "DNS-rebinding protection stays on",
    )
    allowed_origins: list[str] = Field(
        default_factory=list, description="Origin headers accepted besides loopback origins, e.g. https://mcp.example"
    )
    stateless: bool = Field(
        default=False,
        description="no MCP sessions: for handshake-era clients behind a round-robin balancer (they get no "
        "list_changed pushes then); 2026-07-28 clients need no sessions either way",
    )
    drain_seconds: float = Field(
        default=30.0,
        ge=0,
        description="on SIGTERM, how long runs in flight may take to finish while /ready says 503 and new MCP "
        "requests get 503 with Retry-After; past it they end with an MCP error",
    )
    ui: bool | None = Field(
        default=None,
        description="serve the operator's console at /ui (default: on a loopback or TLS listener; off another "
        "unless ui.allow_plain_http)",
    )
    ready_requires_servers: list[str] | Literal["all"] = Field(
        default_factory=list,
        description="servers that must be connected for /ready to answer 200; 'all': every enabled, "
        "non-quarantined one (default: none: ready once the servers' first connection attempts ended, or "
        "startup_wait passed)",
    )


Management = Literal["read-only", "propose", "full"]
Exposure = Literal["all", "search"]


class DirectConfig(_Strict):
    """What a model may do through the management tools of ``/mcp/direct``. A model is not an operator: whatever
    the mode, a server it adds is a proposal that runs nothing until an operator approves it, and it never undoes
    an operator's decision."""

    management: Management = Field(
        default="propose",
        description="read-only: list servers; propose: also add a server as a proposal and review quarantine; "
        "full: also enable, disable, restart and remove the servers it added itself",
    )
    max_proposals: int = Field(
        default=20,
        ge=0,
        description="servers a model may have proposed and awaiting an operator's decision at once (per actor); "
        "past it, a proposal is refused until an operator approves or rejects some",
    )
    max_proposal_bytes: int = Field(
        default=16_384,
        ge=256,
        description="the largest proposal a model may make: bytes of its server entry as JSON",
    )
    cache_entries: int = Field(
        default=64, ge=1, description="cut results kept whole for read_cache; past it the least recently read goes"
    )
    cache_mb: float = Field(
        default=64.0,
        gt=0,
        description="memory all results kept for read_cache may take (MB); a larger result is cut and not kept",
    )
    cache_ttl: float = Field(default=900.0, gt=0, description="seconds a cut result stays readable by read_cache")
    expose: Exposure = Field(
        default="all",
        description="all: list every upstream tool (as server:tool) beside the management tools; search: list only "
        "the management tools, and let a model find upstream tools with search_tools and call them with call_tool",
    )


class RegistryConfig(_Strict):
    """An MCP registry that ``search_servers`` on ``/mcp/direct`` searches: one speaking the official registry's
    API (``GET {url}/v0.1/servers?search=...``), such as https://registry.modelcontextprotocol.io."""

    name: str = Field(min_length=1, max_length=64, description="what list_registries and search_servers call it")
    url: str = Field(description="the registry's base URL, without /v0.1")
    description: str = Field(default="", description="shown by list_registries")
    headers: dict[str, str] = Field(default_factory=dict, repr=False, description="sent with every request")
    api: Literal["v0.1", "v0"] = Field(
        default="v0.1", description="API version path: v0.1 (stable) or v0 (the official registry's development one)"
    )
    timeout: float = Field(default=10.0, gt=0, description="seconds per request")
    allow_http: bool = Field(default=False, description="reach a plain http:// url on a host that is not loopback")

    @model_validator(mode="after")
    def _http_url(self) -> RegistryConfig:
        if urlsplit(self.url).scheme not in ("http", "https"):
            raise ValueError(f"url must be an http(s) URL, got '{self.url}'")
        if not self.allow_http and (refused := _plain_http_refused(self.url, "allow_http")):
            raise ValueError(f"url: {refused}")
        return self


class InspectConfig(_Strict):
    """The inspect/exec face (``/mcp/inspect``, ``serve --mode inspect``)."""

    schema_compression: bool = Field(default=True, description="show input schemas as TypeScript-style types")
    max_description_len: int = Field(
        default=DEFAULT_MAX_DESCRIPTION_LEN, ge=0, description="characters of each property description kept; 0: none"
    )


Semantic = Literal["auto", "on", "off"]


class SearchConfig(_Strict):
    """How the tool index ranks (``proxy.search``, ``search_tools``, ``inspect(query=...)`` and the others)."""

    semantic: Semantic = Field(
        default="auto",
        description="auto: also rank by meaning when the semantic extra (pip install 'onetool[semantic]') is "
        "installed; on: the same, and a gateway without it does not start; off: BM25 over words only",
    )

    @field_validator("semantic", mode="before")
    @classmethod
    def _yaml_switch(cls, value: object) -> object:
        """YAML reads an unquoted ``on`` and ``off`` as true and false."""
        return {True: "on", False: "off"}.get(value, value) if isinstance(value, bool) else value


class SamplingConfig(_Strict):
    """What one run (or one direct or exec call) may ask of its client's model for the upstreams it calls
    (``sampling/createMessage``, forwarded per ``servers.NAME.sampling``)."""

    max_requests: int = Field(default=10, ge=0, description="sampling requests forwarded per run; more are refused")
    max_tokens: int = Field(
        default=20_000,
        ge=0,
        description="the max_tokens of the sampling requests forwarded per run, summed; a request past it is refused",
    )


class UiConfig(_Strict):
    """The operator's console at ``/ui`` (``http.ui`` turns it on or off)."""

    show_code: bool = Field(
        default=False, description="show each run's snippet in the console's list of runs (snippets may hold data)"
    )
    allow_plain_http: bool = Field(
        default=False,
        description="serve /ui on a listener that is neither loopback nor TLS: the admin token and the session "
        "cookie then cross the network unencrypted",
    )


class StateConfig(_Strict):
    url: str | None = Field(
        default=None,
        repr=False,
        description="SQLAlchemy URL of the state store, e.g. one PostgreSQL for replicas (default: this config's "
        "own SQLite file)",
    )
    dir: Path | None = Field(
        default=None,
        description="folder of this config's SQLite store (default: its own folder under the user's state folder, "
        "keyed by the config file's path); relative to the config file",
    )


class LogConfig(_Strict):
    """Where the gateway logs, and how much of it is kept: a log file is rotated by size, never by time."""

    file: Path | None = Field(default=None, description="log here instead of stderr (--log-file overrides it)")
    rotation: ByteSize = Field(
        default=ByteSize(DEFAULT_ROTATION),
        ge=1_000,
        description="start a new file once the log file reaches this size, e.g. 10 MB or 512 KiB",
    )
    retention: int = Field(default=DEFAULT_RETENTION, ge=1, description="rotated files kept; older ones are deleted")


class BridgeConfig(_Strict):
    """Where the gateway finds ``onetool bridge`` (to convert stdio servers); ``$ONETOOL_BRIDGE_URL`` and
    ``$ONETOOL_BRIDGE_TOKEN`` override the file (see :meth:`resolved`)."""

    url: str | None = Field(default=None, description="base URL of the bridge, e.g. https://bridge-host:8080")
    token: str | None = Field(default=None, repr=False, description="the bridge's bearer token")
    allow_http: bool = Field(
        default=False,
        description="reach a plain http:// url on a host that is not loopback, and the servers the bridge serves "
        "there (logged as a warning when each connects)",
    )

    @model_validator(mode="after")
    def _no_plain_http(self) -> BridgeConfig:
        if not self.allow_http and (refused := _plain_http_refused(self.url, "allow_http")):
            raise ValueError(f"url: {refused}")
        return self

    def resolved(self, environ: Mapping[str, str] | None = None) -> BridgeConfig:
        """With the environment's overrides; a plain-http ``$ONETOOL_BRIDGE_URL`` is held to the file's rule."""
        env = os.environ if environ is None else environ
        url = env.get(ENV_BRIDGE_URL)
        if url and not self.allow_http and (refused := _plain_http_refused(url, "bridge.allow_http")):
            raise ConfigError(f"${ENV_BRIDGE_URL}: {refused}")
        return self.model_copy(update={"url": url or self.url, "token": env.get(ENV_BRIDGE_TOKEN) or self.token})


class OtelConfig(_Strict):
    """OpenTelemetry traces (needs the ``otel`` extra): each run is a span, its upstream calls and connects are
    child spans, exported over OTLP/HTTP; HTTP upstreams get the call's ``traceparent``. Read at start only."""

    endpoint: str = Field(description="the collector's OTLP/HTTP traces URL, e.g. http://127.0.0.1:4318/v1/traces")
    service_name: str = Field(default="onetool", min_length=1, description="the spans' service.name")
    headers: dict[str, str] = Field(
        default_factory=dict, repr=False, description="sent with every export, e.g. the collector's API key"
    )
    timeout: float = Field(default=10.0, gt=0, description="seconds one export may take")
    sample_ratio: float = Field(
        default=1.0,
        ge=0,
        le=1,
        description="the share of runs traced (a run in an agent's trace follows the agent's choice)",
    )
    allow_http: bool = Field(default=False, description="export to a plain http:// url on a host that is not loopback")

    @model_validator(mode="after")
    def _no_plain_http(self) -> OtelConfig:
        if not self.allow_http and (refused := _plain_http_refused(self.endpoint, "allow_http")):
            raise ValueError(f"endpoint: {refused}")
        return self


class Config(_Strict):
    servers: dict[str, ServerConfig] = Field(default_factory=dict)
    packs: PacksConfig = Field(default_factory=PacksConfig)
    sandbox: SandboxConfig = Field(default_factory=SandboxConfig)
    http: HttpConfig = Field(default_factory=HttpConfig)
    state: StateConfig = Field(default_factory=StateConfig)
    inspect: InspectConfig = Field(default_factory=InspectConfig)
    search: SearchConfig = Field(default_factory=SearchConfig)
    direct: DirectConfig = Field(default_factory=DirectConfig)
    registries: list[RegistryConfig] = Field(
        default_factory=list, description="MCP registries /mcp/direct's search_servers searches"
    )
    bridge: BridgeConfig = Field(default_factory=BridgeConfig)
    sampling: SamplingConfig = Field(default_factory=SamplingConfig)
    roots: list[str] = Field(
        default_factory=list,
        description="what an upstream's roots/list gets when the client of its call cannot be asked for its own: "
        "file:// URIs or absolute paths",
    )
    log: LogConfig = Field(default_factory=LogConfig)
    ui: UiConfig = Field(default_factory=UiConfig)
    otel: OtelConfig | None = Field(default=None, description="export traces (OpenTelemetry); none when absent")
    watch: bool = Field(
        default=False, description="re-read this file (and local packs) when it changes, as `onetool reload` does"
    )
    startup_wait: float | None = Field(
        default=None,
        ge=0,
        description="seconds a gateway's first tools/list (and every request that shows or calls tools) waits at "
        "start for servers still on their first connection attempt; later ones follow with list_changed "
        "(default: the largest enabled connect_timeout, at most 30; 0: answer at once with what is there)",
    )
    path: Path | None = Field(default=None, exclude=True, description="the file this came from")

    @field_validator("roots")
    @classmethod
    def _file_roots(cls, roots: list[str]) -> list[str]:
        """Each root as a file:// URI (roots/list carries only those)."""
        uris = []
        for root in roots:
            if root.startswith("file://"):
                uris.append(root)
            elif Path(root).expanduser().is_absolute():
                uris.append(Path(root).expanduser().as_uri())
            else:
                raise ValueError(f"{root!r} is neither a file:// URI nor an absolute path")
        return uris

    @model_validator(mode="after")
    def _unique_registry_names(self) -> Config:
        names = [r.name for r in self.registries]
        if twice := sorted({n for n in names if names.count(n) > 1}):
            raise ValueError(f"registries: each name once; given more than once: {', '.join(twice)}")
        return self

    @model_validator(mode="after")
    def _unique_pack_names(self) -> Config:
        seen: dict[str, str] = {}
        for name in self.servers:
            pack = to_identifier(name)
            if pack in seen:
                raise ValueError(f"servers '{seen[pack]}' and '{name}' both become pack '{pack}'; rename one of them")
            seen[pack] = name
        return self

    @property
    def store_url(self) -> str:
        """The state store of this config: ``state.url``, else its project's SQLite file."""
        return self.state.url or f"sqlite+aiosqlite:///{self.store_file}"

    @property
    def store_file(self) -> Path:
        """This config's own SQLite store (used unless ``state.url`` names another)."""
        return project_database(self.path, self.state.dir)

    @property
    def enabled_servers(self) -> dict[str, ServerConfig]:
        return {name: s for name, s in self.servers.items() if s.enabled}
