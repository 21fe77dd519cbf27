"""Plain http:// to a host that is not loopback is refused when the config is loaded, unless the entry opts in with
``allow_http: true``: for servers, for ``bridge.url``, and for ``$ONETOOL_BRIDGE_URL``."""

from __future__ import annotations

from pathlib import Path

import pytest

from onetool.config import BridgeConfig, load_config, validate_server
from onetool.errors import ConfigError
from tests.config.test_config import error_of, write


def test_a_server_over_plain_http_needs_allow_http(tmp_path: Path) -> None:
    text = "servers:\n  remote:\n    url: http://user:pw-secret@10.1.2.3:8080/mcp?key=q-secret\n"
    error = error_of(write(tmp_path, text))
    assert error.startswith(f"{tmp_path / 'onetool.yaml'}: invalid configuration: servers.remote: url: ")
    assert "plain http:// to 10.1.2.3" in error and "use https://, or set allow_http: true" in error
    assert "pw-secret" not in error and "q-secret" not in error
    allowed = load_config(write(tmp_path, text + "    allow_http: true\n")).servers["remote"]
    assert allowed.url == "http://user:pw-secret@10.1.2.3:8080/mcp?key=q-secret" and allowed.allow_http


def test_allow_http_is_for_http_servers_only(tmp_path: Path) -> None:
    error = error_of(write(tmp_path, "servers:\n  local:\n    command: node\n    allow_http: true\n"))
    assert "servers.local: allow_http cannot be used with a stdio ('command') server" in error


def test_a_server_added_at_run_time_follows_the_same_rule() -> None:
    with pytest.raises(ConfigError) as refused:
        validate_server("remote", {"url": "http://mcp.internal/mcp"})
    assert "plain http:// to mcp.internal" in str(refused.value) and "allow_http: true" in str(refused.value)
    assert validate_server("remote", {"url": "http://mcp.internal/mcp", "allow_http": True}).allow_http


@pytest.mark.parametrize("url", ["https://bridge-host:8080", "http://127.0.0.1:8080", "http://localhost:8080"])
def test_a_bridge_over_https_or_loopback_needs_nothing(tmp_path: Path, url: str) -> None:
    assert load_config(write(tmp_path, f"bridge:\n  url: {url}\n")).bridge.url == url


def test_a_bridge_over_plain_http_needs_bridge_allow_http(tmp_path: Path) -> None:
    text = "bridge:\n  url: http://bridge-host:8080\n  token: t\n"
    error = error_of(write(tmp_path, text))
    assert "bridge: url: plain http:// to bridge-host" in error and "set allow_http: true" in error
    assert load_config(write(tmp_path, text + "  allow_http: true\n")).bridge.allow_http


def test_the_bridge_url_from_the_environment_follows_the_files_rule() -> None:
    environ = {"ONETOOL_BRIDGE_URL": "http://10.9.8.7:8080", "ONETOOL_BRIDGE_TOKEN": "env-token"}
    with pytest.raises(ConfigError) as refused:
        BridgeConfig(url="https://bridge-host:8080").resolved(environ)
    assert str(refused.value).startswith("$ONETOOL_BRIDGE_URL: plain http:// to 10.9.8.7")
    assert "set bridge.allow_http: true" in str(refused.value) and "env-token" not in str(refused.value)
    resolved = BridgeConfig(allow_http=True).resolved(environ)
    assert (resolved.url, resolved.token, resolved.allow_http) == ("http://10.9.8.7:8080", "env-token", True)
    assert BridgeConfig().resolved({"ONETOOL_BRIDGE_URL": "https://10.9.8.7:8080"}).url == "https://10.9.8.7:8080"
