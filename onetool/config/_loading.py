"""Reading a config file: YAML or JSON, a client's ``mcpServers`` layout, ``${VAR}`` expansion, validation.

Every problem (unreadable file, bad YAML, unknown key, wrong type, unset ``${VAR}``, a name clash after
sanitising) raises one :class:`ConfigError` whose message names the file, the key path and what was expected.
Secret values (env values, header values, tokens) never appear in those messages.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, get_args

import yaml
from pydantic import BaseModel, ValidationError

from onetool.clients import MCP_SERVERS, Converted, Loc, convert
from onetool.config._models import _VAR, Config, ServerConfig
from onetool.errors import ConfigError
from onetool.logs import logger
from onetool.state.paths import DEFAULT_FILENAME, ENV_CONFIG


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
    config = _resolve_paths(validate(raw, path, where), path)
    _refuse_itself(config, path)
    return config


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
    words = [Path(server.command).name, *server.args]
    start = next((i for i, word in enumerate(words) if Path(word).name == "onetool"), None)
    if start is None or words[start + 1 : start + 2] != ["serve"]:
        return None
    options, named = words[start + 2 :], None
    for i, option in enumerate(options):
        if option == "--config" and i + 1 < len(options):
            named = options[i + 1]
        elif option.startswith("--config="):
            named = option.split("=", 1)[1]
    found = named or server.env.get(ENV_CONFIG) or DEFAULT_FILENAME
    return (server.cwd or Path.cwd()) / found
