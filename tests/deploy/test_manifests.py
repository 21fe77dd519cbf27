"""The Dockerfile, deploy/compose.yaml, deploy/k8s/ and deploy/haproxy.cfg hold together and match the code: one
port everywhere, the command line the real `onetool` parser accepts, probes on the right paths, grace periods
longer than the drain, secrets and selectors that resolve, the config mounted where the command reads it and
loading with the environment each manifest gives, and the README's commands start these files.

There is no Docker engine or cluster here: the files are read as data (tests/deploy/manifests.py). What needs a
running gateway (the probe paths answer, the healthcheck command passes) is in test_served.py.
"""

from __future__ import annotations

import re
import shlex
import tomllib
from pathlib import PurePosixPath
from typing import Any
from urllib.parse import urlsplit

import pytest

from onetool.config import Config, HttpConfig, load_config, read_config_file
from onetool.config._models import _VAR
from tests import haproxy
from tests.deploy.manifests import (
    COMPOSE,
    CONFIG,
    DOCKERFILE,
    DOCKERIGNORE,
    HAPROXY_CFG,
    REPO,
    SECRET_VALUES,
    compose,
    compose_value,
    container_port,
    dockerfile,
    duration_seconds,
    effective_argv,
    exposed_ports,
    haproxy_section,
    healthcheck_url,
    host_port,
    image_argv,
    image_env,
    image_user,
    instruction,
    k8s_container,
    k8s_env,
    k8s_object,
    serve_options,
)

COMPOSE_ENV = {"ONETOOL_TOKEN": "client-token", "ONETOOL_ADMIN_TOKEN": "admin-token", "POSTGRES_PASSWORD": "pg-pass"}
"""What an operator exports before `docker compose up` (compose.yaml refuses to start without them)."""
HAPROXY_IMAGE_CFG = "/usr/local/etc/haproxy/haproxy.cfg"
"""Where the official haproxy image reads its config."""
GATEWAY_OVERHEAD_MB = 256
"""The gateway process itself, beside its sandbox workers (about 100 MB measured; README, Performance)."""


def as_argv(value: str | list[str] | None) -> list[str] | None:
    return shlex.split(value) if isinstance(value, str) else value


def mount(entry: str) -> tuple[str, str]:
    """A Compose short-syntax volume ``SOURCE:TARGET[:MODE]``: its source and target."""
    source, target, *_ = entry.split(":")
    return source, target


def replica_services() -> dict[str, dict[str, Any]]:
    """The Compose services built from this repository's Dockerfile: the replicas."""
    found = {}
    for name, service in compose()["services"].items():
        build = service.get("build")
        context = build if isinstance(build, str) else (build or {}).get("context")
        if context is not None and (COMPOSE.parent / context).resolve() == REPO:
            dockerfile_name = build.get("dockerfile", "Dockerfile") if isinstance(build, dict) else "Dockerfile"
            assert dockerfile_name == DOCKERFILE.name, name
            found[name] = service
    return found


def published(service: dict[str, Any]) -> tuple[int, int]:
    """The one port a Compose service publishes: (on the host, in the container)."""
    (entry,) = service["ports"]
    host, container = str(entry).split(":")[-2:]
    return int(host), int(container)


def deployment_pod() -> dict[str, Any]:
    return k8s_object("Deployment")["spec"]["template"]["spec"]


def compose_env(service: dict[str, Any]) -> dict[str, str]:
    environment = service["environment"]
    assert isinstance(environment, dict), "give the environment as a mapping"
    return {key: compose_value(str(value), COMPOSE_ENV) for key, value in environment.items()}


def deploy_config(env: dict[str, str]) -> Config:
    return load_config(CONFIG, environ=env)


def strings(value: Any) -> list[str]:
    """Every string in a loaded YAML document (comments are gone by then)."""
    if isinstance(value, dict):
        return [s for v in value.values() for s in strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in strings(v)]
    return [value] if isinstance(value, str) else []


def prestop_seconds(pre_stop: dict[str, Any]) -> float:
    """How long the preStop hook holds the pod before SIGTERM: ``exec: sleep N``, or the ``sleep`` action."""
    if "sleep" in pre_stop:
        return float(pre_stop["sleep"]["seconds"])
    command = pre_stop["exec"]["command"]
    assert command[0] == "sleep" and len(command) == 2, f"a preStop that is not a sleep: {command}"
    return float(command[1])


def mebibytes(quantity: str) -> float:
    """A Kubernetes memory quantity in MiB (``2Gi``, ``512Mi``)."""
    parts = re.fullmatch(r"(\d+(?:\.\d+)?)(Mi|Gi)", quantity)
    assert parts, f"not a quantity in Mi or Gi: {quantity}"
    return float(parts[1]) * (1024 if parts[2] == "Gi" else 1)


def test_the_image_runs_onetool_serve_on_every_interface() -> None:
    options = serve_options(image_argv())
    # Every interface: the port is published (compose) or probed and balanced (Kubernetes) from outside.
    assert options.host == "0.0.0.0"
    assert PurePosixPath(options.config).is_absolute()
    assert exposed_ports() == [options.port]


def test_compose_and_kubernetes_run_the_image_command() -> None:
    expected = vars(serve_options(image_argv()))
    services = replica_services()
    assert len(services) == 2, f"two replicas, not {sorted(services)}"
    for name, service in services.items():
        argv = effective_argv(as_argv(service.get("entrypoint")), as_argv(service.get("command")))
        assert vars(serve_options(argv)) == expected, name
    container = k8s_container()
    assert vars(serve_options(effective_argv(container.get("command"), container.get("args")))) == expected


def test_every_port_is_the_one_the_gateway_serves_on() -> None:
    port = serve_options(image_argv()).port
    container = k8s_container()
    assert [p["containerPort"] for p in container["ports"]] == [port]
    service = k8s_object("Service")
    assert [container_port(container, p["targetPort"]) for p in service["spec"]["ports"]] == [port]

    # HAProxy's defaults name the compose replicas, on the port the gateway serves on.
    servers = [words[2] for words in haproxy_section("backend", "onetool") if words[0] == "server"]
    assert sorted(host_port(s)[0] for s in servers) == sorted(replica_services())
    assert {host_port(s)[1] for s in servers} == {port}
    # Clients reach HAProxy on the port compose publishes.
    (bind,) = [words[1] for words in haproxy_section("frontend") if words[0] == "bind"]
    assert published(compose()["services"]["haproxy"])[1] == host_port(bind)[1]

    # The healthcheck runs inside the container: loopback, the served port.
    url = urlsplit(healthcheck_url())
    assert (url.hostname, url.port) == ("127.0.0.1", port)


def test_probes_ask_the_right_question_on_the_served_port() -> None:
    port = serve_options(image_argv()).port
    container = k8s_container()
    # /ready: may this replica get traffic (503 while the store is unreadable or while draining); /health: is the
    # process alive. Liveness on /ready would restart a replica for a store outage or in the middle of its drain.
    expected = {"readinessProbe": "/ready", "livenessProbe": "/health", "startupProbe": "/health"}
    for probe, path in expected.items():
        get = container[probe]["httpGet"]
        assert get["path"] == path, probe
        assert get.get("scheme", "HTTP") == "HTTP", probe
        assert container_port(container, get["port"]) == port, probe
    assert urlsplit(healthcheck_url()).path == "/health"
    # HAProxy takes a replica out of rotation as a readiness probe would.
    backend = haproxy_section("backend", "onetool")
    assert ["option", "httpchk"] in backend
    (send,) = [words for words in backend if words[:2] == ["http-check", "send"]]
    assert send[send.index("uri") + 1] == "/ready"
    (defaults,) = [words for words in backend if words[0] == "default-server"]
    assert "check" in defaults
    # The replicas keep the image's healthcheck.
    assert all("healthcheck" not in service for service in replica_services().values())


def test_stopping_gives_runs_in_flight_their_drain() -> None:
    drains = {
        HttpConfig.model_fields["drain_seconds"].default,
        deploy_config(compose_env(next(iter(replica_services().values())))).http.drain_seconds,
        deploy_config(k8s_env(SECRET_VALUES)).http.drain_seconds,
    }
    drain = max(drains)
    assert instruction("STOPSIGNAL") == "SIGTERM"

    # Kubernetes: the preStop sleep runs first (so endpoints drop the pod before it refuses anything), then
    # SIGTERM and the drain; the grace period covers both, or the kubelet kills runs mid-way.
    pod, container = deployment_pod(), k8s_container()
    pre_stop = prestop_seconds(container["lifecycle"]["preStop"])
    assert pre_stop > 0
    assert pod["terminationGracePeriodSeconds"] > pre_stop + drain

    for name, service in replica_services().items():
        assert service.get("stop_signal", "SIGTERM") == "SIGTERM", name
        assert duration_seconds(service["stop_grace_period"]) > drain, name

    # HAProxy sees /ready turn 503 and stops sending long before the drain ends.
    (defaults,) = [words for words in haproxy_section("backend", "onetool") if words[0] == "default-server"]
    inter = duration_seconds(defaults[defaults.index("inter") + 1])
    assert inter * int(defaults[defaults.index("fall") + 1]) < drain


def test_the_secret_has_every_key_the_deployment_reads() -> None:
    secret = k8s_object("Secret")
    keys = set(secret.get("stringData", {})) | set(secret.get("data", {}))
    refs = [e["valueFrom"]["secretKeyRef"] for e in k8s_container()["env"] if "secretKeyRef" in e.get("valueFrom", {})]
    assert refs
    assert {ref["name"] for ref in refs} == {secret["metadata"]["name"]}
    assert {ref["key"] for ref in refs} == keys


def test_each_manifest_sets_every_variable_the_config_requires() -> None:
    # `${VAR}` without a default: the gateway stops with a config error when it is unset.
    required = {
        m[2] for text in strings(read_config_file(CONFIG)) for m in _VAR.finditer(text) if not m[1] and m[3] is None
    }
    assert {"ONETOOL_TOKEN", "ONETOOL_ADMIN_TOKEN", "POSTGRES_PASSWORD"} <= required
    assert required <= set(k8s_env(SECRET_VALUES))
    for name, service in replica_services().items():
        assert required <= set(service["environment"]), name


def test_the_deploy_config_loads_as_compose_runs_it() -> None:
    host_port_published = published(compose()["services"]["haproxy"])[0]
    postgres = compose()["services"]["postgres"]
    assert str(postgres["image"]).startswith("postgres:")
    for name, service in replica_services().items():
        config = deploy_config(compose_env(service))
        store = urlsplit(config.state.url)
        assert store.scheme == "postgresql+asyncpg"
        assert store.hostname in compose()["services"], name
        assert store.hostname == "postgres"
        assert store.username == postgres["environment"]["POSTGRES_USER"]
        assert store.path == "/" + postgres["environment"]["POSTGRES_DB"]
        assert store.password == compose_value(postgres["environment"]["POSTGRES_PASSWORD"], COMPOSE_ENV)
        assert (config.http.token, config.http.admin_token) == ("client-token", "admin-token")
        # Clients send HAProxy's published address as Host and Origin; HAProxy passes them on.
        assert config.http.allowed_hosts == [f"localhost:{host_port_published}"]
        assert config.http.allowed_origins == [f"http://localhost:{host_port_published}"]
        # HAProxy keeps a handshake-era session on its replica: sessions (and their pushes) stay on.
        assert config.http.stateless is False
        backend = haproxy_section("backend", "onetool")
        assert ["stick", "match", "req.hdr(mcp-session-id)"] in backend
        assert ["stick", "store-response", "res.hdr(mcp-session-id)"] in backend


def test_the_deploy_config_loads_as_kubernetes_runs_it() -> None:
    env = k8s_env(SECRET_VALUES)
    config = deploy_config(env)
    store = urlsplit(config.state.url)
    assert (store.scheme, store.hostname, store.password) == ("postgresql+asyncpg", env["POSTGRES_HOST"], "pg-pass")
    assert (config.http.token, config.http.admin_token) == ("client-token", "admin-token")
    service = k8s_object("Service")
    (service_port,) = [p["port"] for p in service["spec"]["ports"]]
    assert config.http.allowed_hosts == [f"{service['metadata']['name']}:{service_port}"]
    # A Service balances connections, not MCP sessions: handshake-era clients are served without one.
    assert config.http.stateless is True


def test_the_image_installs_the_postgresql_driver() -> None:
    dependencies = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    assert any(re.match(r"asyncpg\b", d) for d in dependencies)
    # The package as it is, no extras: the driver must be a dependency, not an extra.
    assert any(re.search(r"\bpip install \.(\s|$)", i.args) for i in dockerfile() if i.keyword == "RUN")


def test_selectors_match_the_pods() -> None:
    deployment = k8s_object("Deployment")
    labels = deployment["spec"]["template"]["metadata"]["labels"]

    def selects(selector: dict[str, str]) -> bool:
        return bool(selector) and all(labels.get(key) == value for key, value in selector.items())

    assert selects(deployment["spec"]["selector"]["matchLabels"])
    assert selects(k8s_object("Service")["spec"]["selector"])
    pdb = k8s_object("PodDisruptionBudget")
    assert selects(pdb["spec"]["selector"]["matchLabels"])
    for spread in deployment["spec"]["template"]["spec"].get("topologySpreadConstraints", []):
        assert selects(spread["labelSelector"]["matchLabels"])
    # A budget that keeps every replica would block every node drain.
    assert 1 <= pdb["spec"]["minAvailable"] < deployment["spec"]["replicas"]


def test_the_config_is_mounted_where_the_command_reads_it() -> None:
    config_path = PurePosixPath(serve_options(image_argv()).config)

    container, pod = k8s_container(), deployment_pod()
    (config_mount,) = [m for m in container["volumeMounts"] if PurePosixPath(m["mountPath"]) == config_path.parent]
    (volume,) = [v for v in pod["volumes"] if v["name"] == config_mount["name"]]
    configmap = k8s_object("ConfigMap")
    assert volume["configMap"]["name"] == configmap["metadata"]["name"]
    files = {item["path"]: item["key"] for item in volume["configMap"].get("items", [])} or {
        key: key for key in configmap["data"]
    }
    assert configmap["data"][files[config_path.name]] == CONFIG.read_text()

    for name, service in replica_services().items():
        sources = {target: source for source, target in map(mount, service["volumes"])}
        assert (COMPOSE.parent / sources[str(config_path)]).resolve() == CONFIG, name
    lb_sources = {target: source for source, target in map(mount, compose()["services"]["haproxy"]["volumes"])}
    assert (COMPOSE.parent / lb_sources[HAPROXY_IMAGE_CFG]).resolve() == HAPROXY_CFG


def test_the_pod_runs_as_the_image_user_and_can_write_where_the_gateway_writes() -> None:
    uid, gid = image_user()
    assert uid != 0
    security = deployment_pod()["securityContext"]
    assert security["runAsNonRoot"] is True
    assert (security["runAsUser"], security["runAsGroup"]) == (uid, gid)

    container = k8s_container()
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    writable = [PurePosixPath(m["mountPath"]) for m in container["volumeMounts"] if not m.get("readOnly")]
    env = image_env()
    # The state and runtime folders, HOME (npx's cache), and /tmp, where the sandbox makes its empty roots.
    for path in (env["HOME"], env["ONETOOL_STATE_DIR"], env["ONETOOL_RUNTIME_DIR"], "/tmp"):
        assert any(PurePosixPath(path).is_relative_to(w) for w in writable), path


def test_the_workers_fit_the_memory_limit() -> None:
    sandbox = deploy_config(k8s_env(SECRET_VALUES)).sandbox
    assert sandbox.max_workers is not None, "the default follows the node's cores, not the container's"
    limit = mebibytes(k8s_container()["resources"]["limits"]["memory"])
    assert sandbox.max_workers * sandbox.memory_mb + GATEWAY_OVERHEAD_MB <= limit


def test_the_build_context_holds_what_the_image_copies() -> None:
    copies = [i.args.split() for i in dockerfile() if i.keyword == "COPY" and not i.args.startswith("--from")]
    sources = {source.rstrip("/") for args in copies for source in args[:-1]}
    for source in sources:
        assert (REPO / source).exists(), source
    ignore = [line.strip() for line in DOCKERIGNORE.read_text().splitlines() if line.strip()[:1] not in ("", "#")]
    # An allow-list: everything is left out but what is named.
    assert ignore[0] == "*"
    assert {line[1:].rstrip("/") for line in ignore if line.startswith("!")} == sources
    project = tomllib.loads((REPO / "pyproject.toml").read_text())
    packages = project["tool"]["setuptools"]["packages"]["find"]["include"]
    assert {p.rstrip("*") for p in packages} | {project["project"]["readme"]} <= sources


@pytest.mark.skipif(haproxy.missing() is not None, reason=str(haproxy.missing()))
def test_haproxy_accepts_the_config_as_compose_and_the_tests_run_it() -> None:
    as_compose = haproxy.check_config({})
    assert as_compose.returncode == 0, as_compose.stdout + as_compose.stderr
    as_tests = {"ONETOOL_LB_BIND": "127.0.0.1:18765", "ONETOOL_A": "127.0.0.1:18001", "ONETOOL_B": "127.0.0.1:18002"}
    checked = haproxy.check_config(as_tests)
    assert checked.returncode == 0 and "warning" not in (checked.stdout + checked.stderr).lower(), checked.stderr


def readme_commands() -> list[list[str]]:
    """The commands of the README's Deploying section, each as words (continuation lines joined)."""
    section = (REPO / "README.md").read_text().split("\n## Deploying\n", 1)[1].split("\n## ", 1)[0]
    block = section.split("```sh\n", 1)[1].split("```", 1)[0]
    lines = [line for line in block.replace("\\\n", " ").splitlines() if line.strip() and not line.startswith("#")]
    return [shlex.split(line) for line in lines]


def test_the_readme_commands_start_these_files() -> None:
    docker, compose_up, kubectl = readme_commands()
    options = serve_options(image_argv())

    # docker build -t NAME . && docker run ... NAME: the port, the config's path, the gateway's home.
    assert docker[:4] == ["docker", "build", "-t", docker[3]] and docker[4:6] == [".", "&&"]
    run = docker[6:]
    assert run[:2] == ["docker", "run"] and run[-1] == docker[3]
    published_ports = [run[i + 1] for i, word in enumerate(run) if word == "-p"]
    assert published_ports == [f"{options.port}:{options.port}"]
    targets = [run[i + 1].split(":")[1] for i, word in enumerate(run) if word == "-v"]
    assert options.config in targets and image_env()["HOME"] in targets
    assert "ONETOOL_TOKEN" in {run[i + 1].split("=")[0] for i, word in enumerate(run) if word == "-e"}

    # The variables compose refuses to start without, then `docker compose -f deploy/compose.yaml up`.
    required = set(re.findall(r"\$\{([A-Za-z_][A-Za-z0-9_]*):\?", COMPOSE.read_text()))
    given = [word.split("=")[0] for word in compose_up if re.fullmatch(r"[A-Z_]+=.*", word)]
    assert set(given) == required
    assert compose_up[len(given) : len(given) + 5] == ["docker", "compose", "-f", "deploy/compose.yaml", "up"]

    assert kubectl == ["kubectl", "apply", "-f", "deploy/k8s/"]
