"""``POST /convert``'s body -> a server name and its stdio ``ServerConfig``, or a 400 that names the field.

Values never appear in an error: ``env`` (and ``args``) may hold secrets.
"""

from __future__ import annotations

import re
from typing import Any, Final

from pydantic import ValidationError

from onetool.config import ServerConfig, expand_vars
from onetool.errors import BridgeError, ConfigError

NAME_PATTERN: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
"""A server name: it is a path segment of /convert/{serverName} and a log field."""

_REQUIRED: Final = ("serverName", "command", "args")
_OPTIONAL: Final = ("env", "timeout")
_SOURCE: Final = "POST /convert"


def request_field(_server: str, *keys: str) -> str:
    """How a bridged server's failure names its settings: the fields of the request that gave them, not the config
    keys a gateway's servers have (:class:`onetool.upstream.status.SettingName`)."""
    return f"the request's {'/'.join(keys)}"


def _bad(field: str, message: str) -> BridgeError:
    return BridgeError(message, 400, field=field)


def parse_convert(body: Any) -> tuple[str, ServerConfig]:
    """The server to start; ``${VAR}`` in command, args and env expand from the bridge's environment."""
    if not isinstance(body, dict):
        raise _bad("body", f"the body must be a JSON object with {', '.join(_REQUIRED)} and optionally env")
    unknown = sorted(set(body) - {*_REQUIRED, *_OPTIONAL})
    if unknown:
        allowed = ", ".join((*_REQUIRED, *_OPTIONAL))
        raise _bad(unknown[0], f"unknown field(s) {', '.join(unknown)}; the fields are {allowed}")
    for field in _REQUIRED:
        if field not in body:
            raise _bad(field, f"missing field '{field}'")
    name = body["serverName"]
    if not isinstance(name, str) or not NAME_PATTERN.fullmatch(name):
        raise _bad(
            "serverName",
            "serverName must be a string of 1-128 letters, digits, '.', '_' or '-', starting with a letter or digit",
        )
    command = body["command"]
    if not isinstance(command, str) or not command.strip():
        raise _bad("command", "command must be a non-empty string (the executable, e.g. npx)")
    args = body["args"]
    if not isinstance(args, list):
        raise _bad("args", "args must be a list of strings")
    for i, arg in enumerate(args):
        if not isinstance(arg, str):
            raise _bad(f"args[{i}]", f"args[{i}] must be a string, not {_json_type(arg)}")
    env = body.get("env") or {}
    if not isinstance(env, dict):
        raise _bad("env", "env must be an object of variable names to string values")
    for key, value in env.items():
        if not isinstance(value, str):
            raise _bad(f"env.{key}", f"env.{key} must be a string, not {_json_type(value)}")
    spec: dict[str, Any] = {"command": command, "args": args, "env": env}
    if "timeout" in body:
        timeout = body["timeout"]
        if isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0:
            raise _bad("timeout", "timeout must be a positive number of seconds per call")
        spec["timeout"] = timeout
    for field in ("command", "args", "env"):
        try:
            spec[field] = expand_vars({field: spec[field]}, _SOURCE)[field]
        except ConfigError as e:
            raise _bad(field, str(e)) from None
    try:
        return name, ServerConfig.model_validate(spec)
    except ValidationError as e:
        first = e.errors(include_input=False, include_url=False)[0]
        field = ".".join(str(part) for part in first["loc"]) or "body"
        raise _bad(field, f"{field}: {first['msg']}") from None


def _json_type(value: Any) -> str:
    names = {bool: "a boolean", int: "a number", float: "a number", list: "a list", dict: "an object"}
    return "null" if value is None else names.get(type(value), type(value).__name__)
