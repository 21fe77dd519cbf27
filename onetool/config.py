"""onetool.yaml (or a client's ``mcpServers`` JSON) -> validated, strict pydantic models.

Every problem (unreadable file, bad YAML, unknown key, wrong type, unset
``${VAR}``, a name clash after sanitising) raises one :class:`ConfigError`
whose message names the file, the key path and what was expected. Secret
values (env values, header values, tokens) never appear in those messages.
"""

from __future__ import annotations

import json
import keyword
import os
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Literal, get_args
from urllib.parse import urlsplit

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from onetool.clients import MCP_SERVERS, Converted, Loc, convert
from onetool.errors import ConfigError
from onetool.inspect.compress import DEFAULT_MAX_DESCRIPTION_LEN
from onetool.logs import logger

DEFAULT_FILENAME = "onetool.yaml"
ENV_CONFIG = "ONETOOL_CONFIG"
ENV_BRIDGE_URL = "ONETOOL_BRIDGE_URL"
ENV_BRIDGE_TOKEN = "ONETOOL_BRIDGE_TOKEN"

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


class OAuthConfig(_Strict):
    """OAuth 2.1 for an HTTP server; every key is optional (discovery and dynamic registration fill the rest)."""

    client_id: str | None = Field(default=None, description="a pre-registered client (default: register dynamically)")
    client_secret: str | None = Field(default=None, repr=False)
    scopes: list[str] = Field(default_factory=list, description="scopes to request (default: what the server asks)")
    flow: Literal["authorization_code", "client_credentials"] | None = Field(
        default=None,
        description="default: client_credentials given a client_secret and no browser, else authorization_code",
    )
    redirect_uri: str | None = Field(
        default=None, description="where the authorization server sends the browser back (default: a loopback port)"
    )
    issuer: str | None = Field(
        default=None, description="the authorization server the client secret belongs to; it is sent nowhere else"
    )

    @model_validator(mode="after")
    def _complete(self) -> OAuthConfig:
        if self.client_secret is not None and self.client_id is None:
            raise ValueError("client_secret needs client_id")
        if self.flow == "client_credentials":
            if self.client_id is None or self.client_secret is None:
                raise ValueError("flow client_credentials needs client_id and client_secret")
            if self.redirect_uri is not None:
                raise ValueError("redirect_uri is only used by flow authorization_code")
        if self.redirect_uri is not None and urlsplit(self.redirect_uri).scheme not in ("http", "https"):
            raise ValueError(f"redirect_uri must be an http(s) URL, got '{self.redirect_uri}'")
        return self


class ServerConfig(_Strict):
    """One upstream MCP server: stdio (``command``) or HTTP (``url``)."""

    command: str | None = None
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict, repr=False)
    cwd: Path | None = None

    url: str | None = None
    headers: dict[str, str] = Field(default_factory=dict, repr=False)
    type: Literal["http", "sse"] | None = None
    oauth: OAuthConfig | None = None

    timeout: float = Field(default=30.0, gt=0, description="seconds per tool call")
    connect_timeout: float = Field(default=20.0, gt=0, description="seconds to connect and list tools")
    enabled: bool = True
    quarantined: bool = Field(
        default=False, description="connect and read its tools, but show and call none until an admin approves it"
    )

    @model_validator(mode="after")
    def _one_transport(self) -> ServerConfig:
        if (self.command is None) == (self.url is None):
            raise ValueError("give either 'command' (a stdio server) or 'url' (an HTTP server), not both")
        if self.command is not None:
            stray = [k for k in ("headers", "type", "oauth") if k in self.model_fields_set]
        else:
            stray = [k for k in ("args", "env", "cwd") if k in self.model_fields_set]
        if stray:
            kind = "stdio ('command')" if self.command is not None else "HTTP ('url')"
            raise ValueError(f"{', '.join(stray)} cannot be used with a {kind} server")
        return self

    @property
    def transport(self) -> Literal["stdio", "http", "sse"]:
        if self.command is not None:
            return "stdio"
        return self.type or "http"


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
        default=None, ge=1, description="runs at once; more wait in line (default: twice the core count)"
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


class InspectConfig(_Strict):
    """The inspect/exec face (``/mcp/inspect``, ``serve --mode inspect``)."""

    schema_compression: bool = Field(default=True, description="show input schemas as TypeScript-style types")
    max_description_len: int = Field(
        default=DEFAULT_MAX_DESCRIPTION_LEN, ge=0, description="characters of each property description kept; 0: none"
    )


class StateConfig(_Strict):
    url: str | None = Field(
        default=None,
        repr=False,
        description="SQLAlchemy URL of the state store (default: SQLite in the user's state folder)",
    )


class BridgeConfig(_Strict):
    """Where the gateway finds ``onetool bridge`` (to convert stdio servers); ``$ONETOOL_BRIDGE_URL`` and
    ``$ONETOOL_BRIDGE_TOKEN`` override the file (see :meth:`resolved`)."""

    url: str | None = Field(default=None, description="base URL of the bridge, e.g. http://bridge-host:8080")
    token: str | None = Field(default=None, repr=False, description="the bridge's bearer token")

    def resolved(self, environ: Mapping[str, str] | None = None) -> BridgeConfig:
        env = os.environ if environ is None else environ
        return self.model_copy(
            update={"url": env.get(ENV_BRIDGE_URL) or self.url, "token": env.get(ENV_BRIDGE_TOKEN) or self.token}
        )


class Config(_Strict):
    servers: dict[str, ServerConfig] = Field(default_factory=dict)
    packs: PacksConfig = Field(default_factory=PacksConfig)
    sandbox: SandboxConfig = Field(default_factory=SandboxConfig)
    http: HttpConfig = Field(default_factory=HttpConfig)
    state: StateConfig = Field(default_factory=StateConfig)
    inspect: InspectConfig = Field(default_factory=InspectConfig)
    bridge: BridgeConfig = Field(default_factory=BridgeConfig)
    path: Path | None = Field(default=None, exclude=True, description="the file this came from")

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
    def enabled_servers(self) -> dict[str, ServerConfig]:
        return {name: s for name, s in self.servers.items() if s.enabled}


def find_config(explicit: str | os.PathLike[str] | None = None) -> Path | None:
    """``--config``, else ``$ONETOOL_CONFIG``, else ``./onetool.yaml`` if it exists, else None."""
    if explicit:
        return Path(explicit)
    if env := os.environ.get(ENV_CONFIG):
        return Path(env)
    default = Path(DEFAULT_FILENAME)
    return default if default.is_file() else None


def load_config(path: str | os.PathLike[str] | None = None, *, environ: dict[str, str] | None = None) -> Config:
    """Load and validate a config file; ``None`` gives the empty config.

    A client's config (Claude Desktop, ``.mcp.json``, Cursor: servers under ``mcpServers``) is read as it is;
    the client settings it drops are logged as warnings.
    """
    if path is None:
        return Config()
    path = Path(path)
    raw = read_config_file(path)
    where: Callable[[Loc], Loc] = _as_is
    if MCP_SERVERS in raw:
        converted = from_client_config(raw, path)
        for dropped in converted.dropped:
            logger.warning("{}: ignoring {}", path, dropped)
        raw, where = converted.raw, converted.where
    raw = _expand(raw, environ if environ is not None else dict(os.environ), path, (), where)
    return _resolve_paths(validate(raw, path, where), path)


def read_config_file(path: Path) -> dict[str, Any]:
    """The top-level mapping of a YAML or JSON (``*.json``) file, ``${VAR}`` references unexpanded."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise ConfigError(f"{path}: cannot read config file: {e.strerror or e}") from None
    if path.suffix.lower() == ".json":
        try:
            raw = json.loads(text) if text.strip() else None
        except json.JSONDecodeError as e:
            raise ConfigError(f"{path}: invalid JSON (line {e.lineno}, column {e.colno}): {e.msg}") from None
    else:
        try:
            raw = yaml.safe_load(text)
        except yaml.YAMLError as e:
            mark = getattr(e, "problem_mark", None)
            at = f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""
            problem = getattr(e, "problem", None) or str(e)
            raise ConfigError(f"{path}: invalid YAML{at}: {problem}") from None
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: expected a mapping at the top level, got {type(raw).__name__}")
    return raw


def from_client_config(raw: dict[str, Any], path: Path) -> Converted:
    """A client's ``mcpServers`` file in OneTool's layout; OneTool's own sections next to it are kept."""
    return convert(raw, path, settings=[name for name in Config.model_fields if name not in ("servers", "path")])


def validate(raw: dict[str, Any], path: Path, where: Callable[[Loc], Loc] | None = None) -> Config:
    """``raw`` (already expanded) as a Config; errors name the key as the file spells it (``where``)."""
    try:
        return Config.model_validate(raw)
    except ValidationError as e:
        raise ConfigError(_describe(path, e, where or _as_is)) from None


def validate_server(name: str, spec: Any) -> ServerConfig:
    """One server entry given at run time (admin API, ``onetool servers add``), checked as a config entry is.

    Values are taken as given: no ``${VAR}`` expansion, and a relative ``cwd`` is relative to the gateway's folder.
    """
    if not isinstance(spec, dict):
        got = type(spec).__name__
        raise ConfigError(f"server '{name}': expected a mapping (command/args/env or url/headers), got {got}")
    try:
        return Config.model_validate({"servers": {name: spec}}).servers[name]
    except ValidationError as e:
        raise ConfigError(_describe(Path(f"server '{name}'"), e, _as_is)) from None


def _as_is(loc: Loc) -> Loc:
    return loc


def expand_vars(value: Any, source: str, environ: Mapping[str, str] | None = None) -> Any:
    """``${VAR}`` references in ``value`` expanded as in a config file; errors name ``source`` and the key."""
    return _expand(value, dict(os.environ if environ is None else environ), Path(source), (), _as_is)


def _expand(value: Any, environ: dict[str, str], path: Path, at: Loc, where: Callable[[Loc], Loc]) -> Any:
    """Expand ``${VAR}`` / ``${VAR:-default}`` in every string; ``$${VAR}`` stays literal."""
    if isinstance(value, dict):
        return {k: _expand(v, environ, path, (*at, str(k)), where) for k, v in value.items()}
    if isinstance(value, list):
        return [_expand(v, environ, path, (*at, i), where) for i, v in enumerate(value)]
    if not isinstance(value, str):
        return value

    def sub(m: re.Match[str]) -> str:
        escaped, var, default = m.groups()
        if escaped:
            return m.group(0)[1:]
        if var in environ:
            return environ[var]
        if default is not None:
            return default
        raise ConfigError(
            f"{path}: {_dotted(where(at))}: environment variable {var} is not set "
            f"(set it, or write ${{{var}:-default}})"
        )

    return _VAR.sub(sub, value)


def _describe(path: Path, error: ValidationError, where: Callable[[Loc], Loc]) -> str:
    lines = []
    for err in error.errors(include_input=False, include_url=False):
        loc = _dotted(where(err["loc"])) or "(top level)"
        msg = err["msg"].removeprefix("Value error, ")
        if err["type"] == "extra_forbidden":
            msg = f"unknown key (allowed here: {', '.join(_allowed_keys(err['loc']))})"
        lines.append(f"{loc}: {msg}")
    head = f"{path}: invalid configuration"
    return head + (": " + lines[0] if len(lines) == 1 else ":\n  " + "\n  ".join(lines))


def _allowed_keys(loc: tuple[int | str, ...]) -> list[str]:
    """The keys the model at ``loc[:-1]`` accepts, for an 'unknown key' message."""
    model: type[BaseModel] = Config
    parts = list(loc[:-1])
    while parts:
        part = parts.pop(0)
        if model is Config and part == "servers":
            parts = parts[1:]  # skip the server's own name
            model = ServerConfig
            continue
        annotation = model.model_fields[str(part)].annotation
        # An optional block (``OAuthConfig | None``) names its model inside the union.
        found = [a for a in (annotation, *get_args(annotation)) if isinstance(a, type) and issubclass(a, BaseModel)]
        if not found:
            break
        model = found[0]
    return [name for name in model.model_fields if name != "path"]


def _dotted(loc: tuple[int | str, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _resolve_paths(config: Config, path: Path) -> Config:
    """Relative paths in the config are relative to the config file, not to the current directory.

    A stdio server runs in the config file's folder unless ``cwd`` says otherwise, so relative
    arguments (``args: [server/index.js]``) mean the same from wherever OneTool is started.
    """
    base = path.resolve().parent
    servers = {
        name: s.model_copy(update={"cwd": base / s.cwd if s.cwd else base}) if s.command else s
        for name, s in config.servers.items()
    }
    packs = config.packs.model_copy(update={"dirs": [base / d for d in config.packs.dirs]})
    return config.model_copy(update={"servers": servers, "packs": packs, "path": path})
