"""The deployment files as data: the Dockerfile's instructions, deploy/compose.yaml, the Kubernetes manifests in
deploy/k8s/ and deploy/haproxy.cfg, read the way Docker, Compose, Kubernetes and HAProxy read them (as far as the
tests need), so the tests can hold them against the code."""

from __future__ import annotations

import argparse
import json
import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from onetool.cli import build_parser
from onetool.cli._serve import cmd_serve

REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy"
DOCKERFILE = REPO / "Dockerfile"
DOCKERIGNORE = REPO / ".dockerignore"
CONFIG = DEPLOY / "onetool.yaml"
COMPOSE = DEPLOY / "compose.yaml"
K8S = DEPLOY / "k8s"
HAPROXY_CFG = DEPLOY / "haproxy.cfg"

SECRET_VALUES = {"token": "client-token", "admin-token": "admin-token", "postgres-password": "pg-pass"}
"""What an operator fills the Kubernetes Secret with."""


@dataclass(frozen=True)
class Instruction:
    keyword: str
    args: str


def dockerfile() -> list[Instruction]:
    """Each instruction, its continuation lines joined; comment lines dropped (also inside a continuation, as
    Docker drops them)."""
    instructions: list[Instruction] = []
    pending = ""
    for line in DOCKERFILE.read_text().splitlines():
        if line.lstrip().startswith("#"):
            continue
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        whole = (pending + line).strip()
        pending = ""
        if whole:
            keyword, _, args = whole.partition(" ")
            instructions.append(Instruction(keyword.upper(), args.strip()))
    assert not pending, "the Dockerfile ends inside a continuation"
    return instructions


def instruction(keyword: str) -> str:
    """The arguments of the last ``keyword`` instruction (the one that counts), which must be there."""
    found = [i.args for i in dockerfile() if i.keyword == keyword]
    assert found, f"the Dockerfile has no {keyword}"
    return found[-1]


def exec_form(args: str) -> list[str]:
    """A JSON array of strings: the exec form, which runs no shell (a shell as pid 1 would not pass SIGTERM on)."""
    argv = json.loads(args)
    assert isinstance(argv, list) and all(isinstance(a, str) for a in argv), f"not the exec form: {args}"
    return argv


def image_env() -> dict[str, str]:
    """The image's environment, from its ENV instructions (``K=V`` pairs)."""
    env: dict[str, str] = {}
    for one in (i.args for i in dockerfile() if i.keyword == "ENV"):
        for pair in shlex.split(one):
            key, sep, value = pair.partition("=")
            assert sep, f"ENV {one}: use the KEY=VALUE form"
            env[key] = value
    return env


def image_user() -> tuple[int, int]:
    """The uid and gid the image runs as (USER uid:gid, numeric: Kubernetes' runAsNonRoot can only check a number)."""
    user = instruction("USER")
    uid, _, gid = user.partition(":")
    assert uid.isdigit() and gid.isdigit(), f"USER {user}: give uid:gid as numbers"
    return int(uid), int(gid)


def healthcheck() -> list[str]:
    """The HEALTHCHECK's command (exec form)."""
    args = instruction("HEALTHCHECK")
    options, sep, command = args.partition("CMD ")
    assert sep and all(o.startswith("--") for o in options.split()), f"HEALTHCHECK {args}"
    return exec_form(command)


def healthcheck_url() -> str:
    """The one URL the HEALTHCHECK command fetches."""
    found = re.findall(r"https?://[^'\"\s]+", " ".join(healthcheck()))
    assert len(found) == 1, healthcheck()
    return found[0]


def exposed_ports() -> list[int]:
    return [int(p.split("/")[0]) for i in dockerfile() if i.keyword == "EXPOSE" for p in i.args.split()]


def image_argv() -> list[str]:
    return exec_form(instruction("ENTRYPOINT")) + exec_form(instruction("CMD"))


def effective_argv(entrypoint: list[str] | None, command: list[str] | None) -> list[str]:
    """What a container runs when its manifest overrides the image's ENTRYPOINT and CMD (Kubernetes' ``command``
    and ``args``, Compose's ``entrypoint`` and ``command``): a new entrypoint drops the image's CMD too."""
    if entrypoint is not None:
        return entrypoint + (command or [])
    return exec_form(instruction("ENTRYPOINT")) + (command if command is not None else exec_form(instruction("CMD")))


def onetool_args(argv: list[str]) -> list[str]:
    """The arguments of `onetool` in ``argv``, which runs it under tini (``tini -- onetool ...``)."""
    assert argv[:3] == ["tini", "--", "onetool"], f"not onetool under tini: {argv}"
    return argv[3:]


def serve_options(argv: list[str]) -> argparse.Namespace:
    """``argv`` parsed by the real `onetool` parser, as `onetool serve --http`."""
    options = build_parser().parse_args(onetool_args(argv))
    assert options.func is cmd_serve and options.http, f"not `onetool serve --http`: {argv}"
    return options


def with_option(args: list[str], option: str, value: str) -> list[str]:
    """``args`` with ``option``'s value replaced (it must be given once, as ``--option VALUE``)."""
    assert args.count(option) == 1, f"{option} is not given once in {args}"
    at = args.index(option) + 1
    return [*args[:at], value, *args[at + 1 :]]


def k8s() -> list[dict[str, Any]]:
    """Every object in deploy/k8s/ (what `kubectl apply -f deploy/k8s/` applies)."""
    objects = []
    for path in sorted(K8S.glob("*.yaml")):
        objects += [doc for doc in yaml.safe_load_all(path.read_text()) if doc is not None]
    return objects


def k8s_object(kind: str) -> dict[str, Any]:
    found = [o for o in k8s() if o["kind"] == kind]
    assert len(found) == 1, f"{len(found)} {kind} objects in deploy/k8s/"
    return found[0]


def k8s_container() -> dict[str, Any]:
    containers = k8s_object("Deployment")["spec"]["template"]["spec"]["containers"]
    assert len(containers) == 1, containers
    return containers[0]


def k8s_env(secrets: dict[str, str]) -> dict[str, str]:
    """The container's environment, with the Secret's keys given ``secrets``' values."""
    env = {}
    for entry in k8s_container()["env"]:
        if "value" in entry:
            env[entry["name"]] = entry["value"]
        else:
            env[entry["name"]] = secrets[entry["valueFrom"]["secretKeyRef"]["key"]]
    return env


def container_port(container: Mapping[str, Any], port: int | str) -> int:
    """A probe's or a Service's port, by number or by the container port's name."""
    if isinstance(port, int):
        return port
    named = [p["containerPort"] for p in container["ports"] if p.get("name") == port]
    assert len(named) == 1, f"no container port named {port!r}"
    return int(named[0])


def compose() -> dict[str, Any]:
    return yaml.safe_load(COMPOSE.read_text())


_COMPOSE_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?[-?])([^}]*))?\}")


def compose_value(value: str, env: Mapping[str, str]) -> str:
    """``value`` with Compose's ``${VAR}``, ``${VAR:-default}`` and ``${VAR:?error}`` interpolated from ``env``."""

    def sub(m: re.Match[str]) -> str:
        name, op, arg = m.groups()
        value = env.get(name)
        if op is None:
            return value or ""
        # With a colon, an empty value counts as unset.
        if value is not None and not (op.startswith(":") and value == ""):
            return value
        if op.endswith("-"):
            return arg
        raise AssertionError(f"compose.yaml needs {name}: {arg}")

    return _COMPOSE_VAR.sub(sub, value)


def duration_seconds(text: str) -> float:
    """A Compose duration such as ``40s`` or ``1m30s``."""
    parts = re.fullmatch(r"(?:(\d+)m)?(?:(\d+(?:\.\d+)?)s)?", text)
    assert parts and text, f"not a duration: {text!r}"
    return int(parts[1] or 0) * 60 + float(parts[2] or 0)


def haproxy_lines() -> list[list[str]]:
    """The cfg's lines as words, comments dropped; ``"${VAR-default}"`` is its default, as with the variable unset
    (as in compose, where the defaults name its services)."""
    lines = []
    for raw in HAPROXY_CFG.read_text().splitlines():
        text = raw.split("#", 1)[0].strip()
        if text:
            text = re.sub(r'"\$\{[A-Za-z_][A-Za-z0-9_]*-([^}]*)\}"', r"\1", text)
            lines.append(text.split())
    return lines


def haproxy_section(kind: str, name: str | None = None) -> list[list[str]]:
    """The lines of the section ``kind [name]`` (``backend onetool``), without its header."""
    found: list[list[str]] | None = None
    sections = {"global", "defaults", "frontend", "backend", "listen", "resolvers", "peers", "userlist"}
    for words in haproxy_lines():
        if words[0] in sections:
            if found is not None:
                break
            if words[0] == kind and (name is None or words[1:2] == [name]):
                found = []
        elif found is not None:
            found.append(words)
    assert found is not None, f"no section {kind} {name or ''} in {HAPROXY_CFG}"
    return found


def host_port(address: str) -> tuple[str, int]:
    host, _, port = address.rpartition(":")
    return host, int(port)
