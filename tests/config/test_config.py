"""onetool.yaml loading: strict validation, ${VAR} expansion, naming, clear errors."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any, get_args

import pytest
import yaml
from pydantic import BaseModel

from onetool.config import Config, SandboxConfig, ServerConfig, find_config, load_config, to_identifier
from onetool.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "onetool.yaml"
    path.write_text(text)
    return path


def error_of(path: Path, environ: dict[str, str] | None = None) -> str:
    with pytest.raises(ConfigError) as info:
        load_config(path, environ=environ or {})
    return str(info.value)


@pytest.mark.parametrize(
    ("name", "ident"),
    [
        ("github-api", "github_api"),
        ("123server", "_123server"),
        ("get-site-info", "get_site_info"),
        ("class", "class_"),
        ("a.b c", "a_b_c"),
        ("ok_name", "ok_name"),
    ],
)
def test_names_become_identifiers(name: str, ident: str) -> None:
    assert to_identifier(name) == ident
    assert ident.isidentifier()


def test_shipped_configs_load() -> None:
    example = load_config(ROOT / "onetool.yaml", environ={})
    assert set(example.servers) == {"time", "everything"}
    assert example.servers["time"].transport == "stdio"
    full = load_config(ROOT / "examples" / "full.yaml", environ={"GITHUB_TOKEN": "t"})
    assert full.servers["notion"].transport == "http"
    assert not full.servers["notion"].enabled
    assert list(full.enabled_servers) == ["github-api", "linear"]
    assert full.servers["linear"].oauth is not None and full.servers["linear"].oauth.scopes == ["read"]
    assert full.direct.management == Config().direct.management == "propose"


def model_keys(model: type[BaseModel], prefix: str = "") -> Iterator[str]:
    """Every key of a config model, dotted (``servers.*.oauth.scopes``): what a config file may set."""
    for name, field in model.model_fields.items():
        if field.exclude:
            continue  # not a key of the file (Config.path)
        key = f"{prefix}{name}"
        yield key
        if model is Config and name == "servers":
            yield from model_keys(ServerConfig, "servers.*.")
            continue
        for inner in (field.annotation, *get_args(field.annotation)):
            if isinstance(inner, type) and issubclass(inner, BaseModel):
                yield from model_keys(inner, key + ".")


def sets(raw: Any, key: list[str]) -> bool:
    if not key:
        return True
    if not isinstance(raw, dict):
        return False
    if key[0] == "*":
        return any(sets(value, key[1:]) for value in raw.values())
    return key[0] in raw and sets(raw[key[0]], key[1:])


def test_full_example_sets_or_mentions_every_key() -> None:
    """examples/full.yaml "shows every key": a key the models gain and the example lacks fails here."""
    text = (ROOT / "examples" / "full.yaml").read_text()
    raw = yaml.safe_load(text)
    comments = " ".join(line.split("#", 1)[1] for line in text.splitlines() if "#" in line)
    keys = list(model_keys(Config))
    assert "servers.*.oauth.client_secret" in keys and "http.drain_seconds" in keys and "path" not in keys
    missing = [k for k in keys if not sets(raw, k.split(".")) and not re.search(rf"\b{k.split('.')[-1]}\b", comments)]
    assert missing == []


def test_log_keys_take_sizes_and_a_file_relative_to_the_config(tmp_path: Path) -> None:
    assert (Config().log.rotation, Config().log.retention, Config().log.file) == (10_000_000, 5, None)
    log = load_config(write(tmp_path, "log:\n  file: logs/gw.log\n  rotation: 512 KiB\n  retention: 2\n")).log
    assert (log.file, log.rotation, log.retention) == (tmp_path / "logs" / "gw.log", 512 * 1024, 2)
    assert "log.rotation" in error_of(write(tmp_path, "log:\n  rotation: lots\n"))
    assert "log.retention" in error_of(write(tmp_path, "log:\n  retention: 0\n"))


def test_ready_requires_names_servers_or_all(tmp_path: Path) -> None:
    assert Config().http.ready_requires_servers == []
    assert load_config(write(tmp_path, "http:\n  ready_requires_servers: all\n")).http.ready_requires_servers == "all"
    assert "http.ready_requires_servers" in error_of(write(tmp_path, "http:\n  ready_requires_servers: some\n"))


def test_no_file_is_the_empty_config() -> None:
    assert load_config(None) == Config()


def test_empty_file_is_valid(tmp_path: Path) -> None:
    assert load_config(write(tmp_path, ""), environ={}).servers == {}


def test_unknown_key_names_path_and_what_was_meant(tmp_path: Path) -> None:
    msg = error_of(write(tmp_path, "servers:\n  wix:\n    command: x\n    timout: 3\n"))
    assert msg.startswith(f"{tmp_path / 'onetool.yaml'}: invalid configuration: ")
    assert msg.endswith(": servers.wix.timout: unknown key; did you mean 'timeout'?")
    # No key is close: every key allowed there is named.
    msg = error_of(write(tmp_path, "servers:\n  wix:\n    command: x\n    flavour: y\n"))
    assert "servers.wix.flavour: unknown key (allowed here: command, args, env, cwd, url, headers, type, oauth," in msg
    nested = error_of(write(tmp_path, "sandbox:\n  memry_mb: 9\nhttp:\n  drain_secs: 1\n"))
    assert "sandbox.memry_mb: unknown key; did you mean 'memory_mb'?" in nested
    assert "http.drain_secs: unknown key; did you mean 'drain_seconds'?" in nested


def test_a_management_mode_is_one_of_three(tmp_path: Path) -> None:
    msg = error_of(write(tmp_path, "direct:\n  management: admin\n"))
    assert "direct.management" in msg and "'read-only', 'propose' or 'full'" in msg


def test_search_semantic_is_auto_on_or_off(tmp_path: Path) -> None:
    assert Config().search.semantic == "auto"
    # YAML reads an unquoted on and off as true and false
    assert load_config(write(tmp_path, "search:\n  semantic: off\n")).search.semantic == "off"
    assert load_config(write(tmp_path, "search:\n  semantic: on\n")).search.semantic == "on"
    assert load_config(write(tmp_path, "search:\n  semantic: 'off'\n")).search.semantic == "off"
    msg = error_of(write(tmp_path, "search:\n  semantic: yes please\n"))
    assert "search.semantic" in msg and "'auto', 'on' or 'off'" in msg


def test_roots_are_file_uris_or_absolute_paths_and_sampling_one_of_two(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, "roots: [/srv/a b, 'file:///srv/c']\n"))
    assert config.roots == ["file:///srv/a%20b", "file:///srv/c"]
    msg = error_of(write(tmp_path, "roots: [projects/x]\n"))
    assert msg.endswith("invalid configuration: roots: 'projects/x' is neither a file:// URI nor an absolute path")
    msg = error_of(write(tmp_path, "servers:\n  a: {command: x, sampling: allow}\n"))
    assert "servers.a.sampling" in msg and "'forward' or 'deny'" in msg
    assert Config().sampling.max_requests == 10 and Config().sampling.max_tokens == 20_000


def test_unknown_top_level_key(tmp_path: Path) -> None:
    msg = error_of(write(tmp_path, "server: {}\n"))
    assert "server: unknown key; did you mean 'servers'?" in msg


def test_a_name_yaml_reads_as_no_text_is_explained(tmp_path: Path) -> None:
    msg = error_of(write(tmp_path, "servers:\n  off: {command: x}\n"))
    assert msg.endswith(
        "invalid configuration: servers: a name YAML reads as no text (unquoted off, on, yes, no, a number): quote "
        "it, as in 'off':"
    )
    assert load_config(write(tmp_path, "servers:\n  'off': {command: x}\n"), environ={}).servers["off"]


def test_wrong_type(tmp_path: Path) -> None:
    msg = error_of(write(tmp_path, "servers:\n  a:\n    url: http://127.0.0.1/mcp\n    timeout: soon\n"))
    assert "servers.a.timeout" in msg and "number" in msg


def test_transport_must_be_one_of_command_or_url(tmp_path: Path) -> None:
    neither = error_of(write(tmp_path, "servers:\n  a: {timeout: 3}\n"))
    assert "servers.a: give 'command' (a stdio server) or 'url' (an HTTP server)" in neither
    assert "not both" in error_of(write(tmp_path, "servers:\n  a: {command: x, url: 'http://h'}\n"))
    assert "headers cannot be used with a stdio" in error_of(
        write(tmp_path, "servers:\n  a: {command: x, headers: {A: b}}\n")
    )


def test_type_names_the_transport_as_clients_do(tmp_path: Path) -> None:
    text = (
        "servers:\n  a: {command: x, type: stdio}\n  b: {url: 'https://h/mcp', type: http}\n"
        "  c: {url: 'https://h/sse', type: sse}\n"
    )
    config = load_config(write(tmp_path, text), environ={})
    assert [s.transport for s in config.servers.values()] == ["stdio", "http", "sse"]
    wrong = error_of(write(tmp_path, "servers:\n  a: {command: x, type: sse}\n"))
    assert "servers.a: type: sse cannot be used with a stdio ('command') server" in wrong
    wrong = error_of(write(tmp_path, "servers:\n  a: {url: 'http://h', type: stdio}\n"))
    assert "servers.a: type: stdio cannot be used with a HTTP ('url') server" in wrong


def test_invalid_yaml_gives_line(tmp_path: Path) -> None:
    msg = error_of(write(tmp_path, "servers:\n  a: [unclosed\n"))
    assert "invalid YAML" in msg and "line" in msg


def test_missing_file(tmp_path: Path) -> None:
    msg = error_of(tmp_path / "nope.yaml")
    assert "nope.yaml" in msg and "cannot read" in msg


def test_env_expansion(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "servers:\n  a:\n    command: x\n    args: ['${ARG}', '$${LITERAL}']\n"
        "    env: {TOKEN: '${TOKEN}', MODE: '${MODE:-fast}'}\n",
    )
    config = load_config(path, environ={"TOKEN": "s3cret", "ARG": "--v"})
    server = config.servers["a"]
    assert server.args == ["--v", "${LITERAL}"]
    assert server.env == {"TOKEN": "s3cret", "MODE": "fast"}
    assert "s3cret" not in repr(config)


def test_unset_variable_is_named_and_no_value_leaks(tmp_path: Path, log_records: list[dict]) -> None:
    path = write(tmp_path, "servers:\n  a:\n    url: 'https://h/${HOST_PART}'\n    headers: {X: '${API_KEY}'}\n")
    config = load_config(path, environ={"HOST_PART": "hunter2"})
    assert config.servers["a"].unset_vars == ("API_KEY",)
    [warning] = [r["message"] for r in log_records if r["level"] == "WARNING"]
    assert "servers.a.headers.X: environment variable API_KEY is not set" in warning
    assert "hunter2" not in warning
    # Outside servers, the whole file needs it.
    msg = error_of(write(tmp_path, "http: {token: '${API_KEY}'}\n"), environ={"HOST_PART": "hunter2"})
    assert msg == (
        f"{path}: http.token: environment variable API_KEY is not set (set it, or write ${{API_KEY:-default}})"
    )


def test_a_disabled_servers_unset_variable_is_no_error(tmp_path: Path, log_records: list[dict]) -> None:
    text = (
        "servers:\n  idle: {command: x, env: {T: '${OFF_TOKEN}'}, enabled: false}\n"
        "  busy: {command: x, env: {T: '${ON_TOKEN:-d}'}}\n"
    )
    path = write(tmp_path, text)
    config = load_config(path, environ={})
    assert (config.servers["idle"].unset_vars, config.servers["busy"].unset_vars) == (("OFF_TOKEN",), ())
    assert config.servers["idle"].env == {"T": "${OFF_TOKEN}"}  # as written: nothing runs it
    warnings = [r["message"] for r in log_records if r["level"] == "WARNING"]
    assert warnings == [
        f"{path}: servers.idle.env.T: environment variable OFF_TOKEN is not set; server 'idle' is disabled, so nothing "
        "uses it until the server is enabled (which needs it set)"
    ]
    # Enabled, that server alone cannot run (the pool shows it failed): the file loads, the others serve.
    log_records.clear()
    enabled = load_config(write(tmp_path, text.replace("enabled: false", "enabled: 'yes'")), environ={})
    assert enabled.servers["idle"].enabled and enabled.servers["idle"].unset_vars == ("OFF_TOKEN",)
    assert [r["message"] for r in log_records if r["level"] == "WARNING"] == [
        f"{path}: servers.idle.env.T: environment variable OFF_TOKEN is not set; server 'idle' fails (the other "
        "servers serve) until it is set where OneTool starts"
    ]
    # A variable outside servers is needed whatever is disabled.
    assert "http.token: environment variable TOKEN_X is not set" in error_of(
        write(tmp_path, text + "http: {token: '${TOKEN_X}'}\n")
    )


def test_a_disabled_client_servers_unset_variable_is_no_error(tmp_path: Path) -> None:
    server = '{"url": "${env:NOPE_URL}", "disabled": true}'
    config = load_config(write_json(tmp_path, '{"mcpServers": {"a": ' + server + "}}"), environ={})
    assert config.servers["a"].unset_vars == ("NOPE_URL",) and not config.servers["a"].enabled
    on = load_config(write_json(tmp_path, '{"mcpServers": {"a": ' + server.replace("true", "false") + "}}"), environ={})
    assert on.servers["a"].unset_vars == ("NOPE_URL",) and on.servers["a"].enabled


def test_pack_name_clash_is_an_error(tmp_path: Path) -> None:
    msg = error_of(write(tmp_path, "servers:\n  github-api: {command: x}\n  github_api: {command: y}\n"))
    assert "both become pack 'github_api'" in msg


def test_relative_paths_are_relative_to_the_config(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    text = "servers:\n  a: {command: x, cwd: sub}\n  b: {command: y}\n  c: {url: 'http://127.0.0.1:1/mcp'}\n"
    config = load_config(write(tmp_path, text + "packs: {dirs: [mine]}\n"), environ={})
    assert config.servers["a"].cwd == tmp_path / "sub"
    # A stdio server runs in the config file's folder, so its relative arguments resolve there.
    assert config.servers["b"].cwd == tmp_path
    assert config.servers["c"].cwd is None
    assert config.packs.dirs == [tmp_path / "mine"]


def test_find_config_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("ONETOOL_CONFIG", raising=False)
    assert find_config(None) is None
    write(tmp_path, "")
    assert find_config(None) == Path("onetool.yaml")
    monkeypatch.setenv("ONETOOL_CONFIG", "/elsewhere.yaml")
    assert find_config(None) == Path("/elsewhere.yaml")
    assert find_config("given.yaml") == Path("given.yaml")


def test_every_key_an_error_message_names_exists() -> None:
    """Messages tell the user which key to raise: `(sandbox.max_calls)`, `servers.{name}.timeout`."""
    root = Path(__file__).resolve().parents[2]
    source = "".join(p.read_text() for folder in ("sandbox", "onetool", "packs") for p in (root / folder).rglob("*.py"))
    named = set(re.findall(r"sandbox\.([a-z_]+)\)", source))
    assert named, "the scan found no key names"
    assert named <= set(SandboxConfig.model_fields), named - set(SandboxConfig.model_fields)
    for key in re.findall(r"servers\.\{name\}\.([a-z_]+)", source):
        assert key in ServerConfig.model_fields, key


# ---- a client's mcpServers file, read as it is ------------------------------------------------

EXAMPLES = ROOT / "examples" / "clients"
URLS = {"EVERYTHING_HTTP_URL": "http://127.0.0.1:1/mcp", "EVERYTHING_SSE_URL": "http://127.0.0.1:1/sse"}


def write_json(tmp_path: Path, text: str, name: str = "claude_desktop_config.json") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_client_examples_load() -> None:
    desktop = load_config(EXAMPLES / "claude_desktop_config.json", environ={})
    assert set(desktop.servers) == {"time", "everything"}
    assert desktop.servers["everything"].args[0].startswith("../../tests/node_modules/")
    assert desktop.servers["everything"].cwd == EXAMPLES  # relative args resolve next to the file
    code = load_config(EXAMPLES / "claude_code.mcp.json", environ=URLS)
    assert {n: s.transport for n, s in code.servers.items()} == {
        "everything": "stdio",
        "everything-http": "http",
        "everything-sse": "sse",
    }
    assert code.servers["everything-http"].url == URLS["EVERYTHING_HTTP_URL"]
    assert code.servers["everything-http"].headers == {"Authorization": "Bearer none"}
    cursor = load_config(EXAMPLES / "cursor_mcp.json", environ={"HOME": "/home/dev"})
    assert cursor.servers["everything"].env == {"HOME": "/home/dev"}  # Cursor's ${env:VAR}
    cline = load_config(EXAMPLES / "cline_mcp_settings.json", environ={})
    assert cline.servers["time"].enabled and not cline.servers["everything-sse"].enabled
    assert cline.servers["everything-sse"].transport == "sse"
    assert cline.servers["time"].timeout == 30  # the client's timeout (unit unknown) is not taken


def test_client_transport_types(tmp_path: Path) -> None:
    servers = {
        "a": '{"type": "stdio", "command": "x"}',
        "b": '{"type": "http", "url": "http://127.0.0.1:1/mcp"}',
        "c": '{"type": "streamable-http", "url": "http://127.0.0.1:1/mcp"}',
        "d": '{"type": "sse", "url": "http://127.0.0.1:1/sse"}',
        "e": '{"url": "http://127.0.0.1:1/mcp"}',
        "f": '{"serverUrl": "http://127.0.0.1:1/mcp"}',
        "g": '{"httpUrl": "http://127.0.0.1:1/mcp"}',
    }
    text = '{"mcpServers": {' + ", ".join(f'"{n}": {s}' for n, s in servers.items()) + "}}"
    config = load_config(write_json(tmp_path, text), environ={})
    assert [s.transport for s in config.servers.values()] == ["stdio", "http", "http", "sse", "http", "http", "http"]


def test_client_settings_are_mapped_or_dropped_with_a_warning(tmp_path: Path, log_records: list[dict]) -> None:
    text = (
        '{"globalShortcut": "Alt+Space", "mcpServers": {"gh": {"command": "npx", "disabled": true,'
        ' "autoApprove": ["x"], "alwaysAllow": [], "timeout": 60}}}'
    )
    path = write_json(tmp_path, text)
    config = load_config(path, environ={})
    assert not config.servers["gh"].enabled
    warnings = "\n".join(r["message"] for r in log_records if r["level"] == "WARNING")
    for key in ("globalShortcut", "mcpServers.gh.autoApprove", "mcpServers.gh.alwaysAllow", "mcpServers.gh.timeout"):
        assert f"{path}: ignoring {key} (" in warnings
    assert "set servers.gh.timeout in seconds" in warnings


def test_client_config_in_yaml_with_onetool_sections(tmp_path: Path) -> None:
    path = write(tmp_path, "mcpServers:\n  a: {command: x, env: {T: '${env:TOKEN}'}}\nsandbox: {timeout: 9}\n")
    config = load_config(path, environ={"TOKEN": "t"})
    assert config.servers["a"].env == {"T": "t"}
    assert config.sandbox.timeout == 9
    assert "sandbox.timeout: Input should be a valid number" in error_of(
        write(tmp_path, "mcpServers: {}\nsandbox: {timeout: soon}\n")
    )


@pytest.mark.parametrize(
    ("server", "expected"),
    [
        (
            '{"command": "x", "comand": "y"}',
            "invalid configuration: mcpServers.a.comand: unknown key; did you mean 'comm",
        ),
        (
            '{"command": "x", "flavour": "y"}',
            "invalid configuration: mcpServers.a.flavour: unknown key (allowed here: com",
        ),
        ('{"serverUrl": 5}', "invalid configuration: mcpServers.a.serverUrl: Input should be a valid string"),
        ('{"command": "x", "disabled": "yes"}', "mcpServers.a.disabled: expected true or false"),
        ('{"type": "ws", "url": "x"}', "mcpServers.a.type: unknown transport 'ws' (use stdio, http, streamable-http,"),
        ('{"type": "stdio", "url": "http://h/mcp"}', "mcpServers.a.type: 'stdio' needs a 'command'"),
        ('{"type": "sse", "command": "x"}', "mcpServers.a.type: 'sse' needs a 'url'"),
        ('{"url": "http://h", "serverUrl": "http://i"}', "mcpServers.a: 'serverUrl' and 'url' both give the url"),
        ('"npx"', "mcpServers.a: expected a mapping"),
    ],
)
def test_client_config_errors_name_file_and_key(tmp_path: Path, server: str, expected: str) -> None:
    path = write_json(tmp_path, '{"mcpServers": {"a": ' + server + "}}")
    msg = error_of(path)
    assert msg.startswith(f"{path}: ")
    assert expected in msg


def test_client_config_file_errors(tmp_path: Path) -> None:
    assert "invalid JSON (line 2, column 1)" in error_of(write_json(tmp_path, '{"mcpServers":\n}'))
    both = write_json(tmp_path, '{"mcpServers": {}, "servers": {}}')
    assert "give servers under either 'mcpServers' or 'servers', not both" in error_of(both)
