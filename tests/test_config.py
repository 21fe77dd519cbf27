"""onetool.yaml loading: strict validation, ${VAR} expansion, naming, clear errors."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from onetool.config import Config, SandboxConfig, ServerConfig, find_config, load_config, to_identifier
from onetool.errors import ConfigError

ROOT = Path(__file__).resolve().parent.parent


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
    assert list(full.enabled_servers) == ["github-api"]


def test_no_file_is_the_empty_config() -> None:
    assert load_config(None) == Config()


def test_empty_file_is_valid(tmp_path: Path) -> None:
    assert load_config(write(tmp_path, ""), environ={}).servers == {}


def test_unknown_key_names_path_and_allowed_keys(tmp_path: Path) -> None:
    msg = error_of(write(tmp_path, "servers:\n  wix:\n    command: x\n    comand: y\n"))
    assert str(tmp_path / "onetool.yaml") in msg
    assert "servers.wix.comand: unknown key" in msg
    assert "command" in msg and "connect_timeout" in msg


def test_unknown_top_level_key(tmp_path: Path) -> None:
    msg = error_of(write(tmp_path, "server: {}\n"))
    assert "server: unknown key" in msg and "servers" in msg


def test_wrong_type(tmp_path: Path) -> None:
    msg = error_of(write(tmp_path, "servers:\n  a:\n    url: http://127.0.0.1/mcp\n    timeout: soon\n"))
    assert "servers.a.timeout" in msg and "number" in msg


def test_transport_must_be_one_of_command_or_url(tmp_path: Path) -> None:
    assert "either 'command'" in error_of(write(tmp_path, "servers:\n  a: {timeout: 3}\n"))
    assert "not both" in error_of(write(tmp_path, "servers:\n  a: {command: x, url: 'http://h'}\n"))
    assert "headers cannot be used with a stdio" in error_of(
        write(tmp_path, "servers:\n  a: {command: x, headers: {A: b}}\n")
    )


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


def test_unset_variable_is_named_and_no_value_leaks(tmp_path: Path) -> None:
    path = write(tmp_path, "servers:\n  a:\n    url: 'http://h/${HOST_PART}'\n    headers: {X: '${API_KEY}'}\n")
    msg = error_of(path, environ={"HOST_PART": "hunter2"})
    assert "API_KEY is not set" in msg and "servers.a.headers.X" in msg
    assert "hunter2" not in msg


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
    root = Path(__file__).resolve().parents[1]
    source = "".join(p.read_text() for folder in ("sandbox", "onetool", "packs") for p in (root / folder).rglob("*.py"))
    named = set(re.findall(r"sandbox\.([a-z_]+)\)", source))
    assert named, "the scan found no key names"
    assert named <= set(SandboxConfig.model_fields), named - set(SandboxConfig.model_fields)
    for key in re.findall(r"servers\.\{name\}\.([a-z_]+)", source):
        assert key in ServerConfig.model_fields, key
