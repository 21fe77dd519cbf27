"""Reading a config file: YAML or JSON, a client's ``mcpServers`` layout, ``${VAR}`` expansion, validation.

Every problem (unreadable file, bad YAML, unknown key, wrong type, unset ``${VAR}`` outside ``servers``, a name
clash after sanitising) raises one :class:`ConfigError` whose message names the file, the key path and what was
expected (for an unknown key, the key it may be a typo of). Secret values (env values, header values, tokens) never
appear in those messages. A server's unset ``${VAR}`` is no error of the file, as a desktop client would have it:
that server alone cannot run (:attr:`ServerConfig.unset_vars`; the pool shows it failed, naming the variable, and
`onetool check` exits 2), the others serve; a disabled one cannot be enabled until it is set.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, get_args

import yaml
from pydantic import BaseModel, TypeAdapter, ValidationError

from onetool.config._models import _VAR, Config, ServerConfig
from onetool.config.clients import MCP_SERVERS, Converted, Loc, convert, onetool_serve_options
from onetool.errors import ConfigError
from onetool.logs import logger
from onetool.state.paths import DEFAULT_FILENAME, ENV_CONFIG
from onetool.text import closest


def no_config_found() -> str:
    """What :func:`find_config` looked at when it found nothing, in its order."""
    here = Path.cwd() / DEFAULT_FILENAME
    return f"no config found; looked at: --config (not given), ${ENV_CONFIG} (not set), {here} (no such file)"


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
    env = environ if environ is not None else dict(os.environ)
    servers = raw.get("servers")
    raw = _expand({k: v for k, v in raw.items() if k != "servers"}, env, path, (), where)
    unset: dict[str, tuple[str, ...]] = {}
    if servers is not None:
        raw["servers"], unset = _expand_servers(servers, env, path, where)
    config = validate(raw, path, where)
    if unset:
        config = config.model_copy(
            update={"servers": {n: s.with_unset_vars(unset.get(n, ())) for n, s in config.servers.items()}}
        )
    config = _resolve_paths(config, path)
    _refuse_itself(config, path)
    return config


def _expand_servers(
    servers: Any, environ: dict[str, str], path: Path, where: Callable[[Loc], Loc]
) -> tuple[Any, dict[str, tuple[str, ...]]]:
    """Each server entry expanded. An entry with an unset ``${VAR}`` keeps the reference as written, and its name
    maps to the variables it lacks (each warned about): that server alone cannot run."""
    if not isinstance(servers, dict):
        return _expand(servers, environ, path, ("servers",), where), {}
    expanded, unset = {}, {}
    for name, entry in servers.items():
        at: Loc = ("servers", str(name))
        missing: list[tuple[Loc, str]] = []
        expanded[name] = _expand(entry, environ, path, at, where, missing)
        if not missing:
            continue
        unset[str(name)] = tuple(dict.fromkeys(var for _, var in missing))
        consequence = (
            "fails (the other servers serve) until it is set where OneTool starts"
            if _enabled(expanded[name])
            else "is disabled, so nothing uses it until the server is enabled (which needs it set)"
        )
        for loc, var in missing:
            logger.warning(
                "{}: {}: environment variable {} is not set; server '{}' {}",
                path,
                _dotted(where(loc)),
                var,
                name,
                consequence,
            )
    return expanded, unset


def unset_references(raw: Any, environ: Mapping[str, str] | None = None) -> list[tuple[str, str]]:
    """Each ``${VAR}`` without a default in ``raw`` (a config file's content, OneTool's layout) whose variable is
    not set: (its key path, the variable), in file order."""
    missing: list[tuple[Loc, str]] = []
    _expand(raw, dict(os.environ if environ is None else environ), Path("-"), (), _as_is, missing)
    return [(_dotted(loc), var) for loc, var in missing]


_BOOL: TypeAdapter[bool] = TypeAdapter(bool)


def _enabled(entry: Any) -> bool:
    """Whether a server entry is enabled, as validation will read its ``enabled`` (an invalid one counts as on)."""
    if not isinstance(entry, dict):
        return True
    try:
        return _BOOL.validate_python(entry.get("enabled", True))
    except ValidationError:
        return True


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


def _expand(
    value: Any,
    environ: dict[str, str],
    path: Path,
    at: Loc,
    where: Callable[[Loc], Loc],
    missing: list[tuple[Loc, str]] | None = None,
) -> Any:
    """Expand ``${VAR}`` / ``${VAR:-default}`` in every string; ``$${VAR}`` stays literal. An unset variable is
    an error, or, given ``missing``, noted there (with its key path) and left as written."""
    if isinstance(value, dict):
        return {k: _expand(v, environ, path, (*at, str(k)), where, missing) for k, v in value.items()}
    if isinstance(value, list):
        return [_expand(v, environ, path, (*at, i), where, missing) for i, v in enumerate(value)]
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
        if missing is not None:
            missing.append((at, var))
            return m.group(0)
        raise _unset(path, where(at), var)

    return _VAR.sub(sub, value)


def _unset(path: Path, loc: Loc, var: str) -> ConfigError:
    """An unset variable without a default, where it is used, and the ways out."""
    return ConfigError(
        f"{path}: {_dotted(loc)}: environment variable {var} is not set (set it, or write ${{{var}:-default}})"
    )


def _describe(path: Path, error: ValidationError, where: Callable[[Loc], Loc]) -> str:
    lines = []
    for err in error.errors(include_input=False, include_url=False):
        loc = _dotted(where(err["loc"])) or "(top level)"
        msg = err["msg"].removeprefix("Value error, ")
        if err["type"] == "extra_forbidden":
            msg = _unknown_key(err["loc"])
        elif err["loc"][-1:] == ("[key]",):
            # YAML reads an unquoted off, on, yes, no or 123 as no string: a server named `off:` is false
            loc = _dotted(where(err["loc"][:-2])) or "(top level)"
            msg = "a name YAML reads as no text (unquoted off, on, yes, no, a number): quote it, as in 'off':"
        lines.append(f"{loc}: {msg}")
    head = f"{path}: invalid configuration"
    return head + (": " + lines[0] if len(lines) == 1 else ":\n  " + "\n  ".join(lines))


def _unknown_key(loc: tuple[int | str, ...]) -> str:
    """What an unknown key may be a typo of, else every key allowed where it sits."""
    allowed = _allowed_keys(loc)
    meant = closest(str(loc[-1]), allowed)
    if meant:
        return f"unknown key; did you mean '{meant[0]}'?"
    return f"unknown key (allowed here: {', '.join(allowed)})"


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
        name: s.model_copy(update={"cwd": base / s.cwd if s.cwd else base})
        if s.command
        else s.model_copy(update={"oauth": s.oauth.relative_to(base)})
        if s.oauth
        else s
        for name, s in config.servers.items()
    }
    packs = config.packs.model_copy(update={"dirs": [base / d for d in config.packs.dirs]})
    log = config.log.model_copy(update={"file": base / config.log.file}) if config.log.file else config.log
    state = config.state.model_copy(update={"dir": base / config.state.dir}) if config.state.dir else config.state
    return config.model_copy(update={"servers": servers, "packs": packs, "log": log, "state": state, "path": path})


def _refuse_itself(config: Config, path: Path) -> None:
    """A stdio server that is OneTool serving this very config would start itself again and again (the runtime
    guard, :mod:`onetool.upstream.ancestry`, catches what this cannot see, such as a wrapper script)."""
    me = path.resolve()
    for name, server in config.servers.items():
        served = _served_config(server)
        if served is not None and served.resolve() == me:
            raise ConfigError(
                f"{path}: servers.{name} runs OneTool on this same config ({server.command} "
                f"{' '.join(server.args)}): a gateway cannot be its own upstream; remove it"
            )


def _served_config(server: ServerConfig) -> Path | None:
    """The config file a stdio server serves if it is ``onetool serve`` (also as ``python -m onetool``, ``uvx
    onetool``, ...), else None."""
    if not server.command:
        return None
    options = onetool_serve_options(server.command, server.args)
    if options is None:
        return None
    named = None
    for i, option in enumerate(options):
        if option == "--config" and i + 1 < len(options):
            named = options[i + 1]
        elif option.startswith("--config="):
            named = option.split("=", 1)[1]
    found = named or server.env.get(ENV_CONFIG) or DEFAULT_FILENAME
    return (server.cwd or Path.cwd()) / found
