"""`onetool auth`, `auth --status`, `auth --logout`, `servers` and a snippet, through the real CLI, against the
OAuth fixture server; the "browser" follows the printed URL with urllib."""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from onetool.state.paths import project_key
from tests.gateways import ONETOOL, auth_command, write_config
from tests.state.conftest import sqlite_execute
from tests.upstream.test_oauth import OAuthServer, fetch, start_server  # noqa: F401 (fixture)


def onetool(home: Path, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "ONETOOL_STATE_DIR": str(home / "state"), "LOG_LEVEL": "WARNING"}
    env.pop("DISPLAY", None)
    return subprocess.run([ONETOOL, *args], env=env, capture_output=True, text=True, timeout=timeout)


def oauth_records(home: Path) -> list[str]:
    store = home / "state" / "projects" / project_key(home / "onetool.yaml") / "onetool.db"  # the config's own
    rows = sqlite_execute(store, "SELECT server FROM oauth_tokens ORDER BY server")
    return [str(row[0]) for row in rows]


def test_auth_status_logout_and_a_snippet_and_status_shows_grant_scopes_expiry_last_refresh_and_error_without_secrets(
    start_server: Callable[..., OAuthServer],  # noqa: F811
    tmp_path: Path,
) -> None:
    """One config and one OAuth server for the whole story, each step a CLI command without a gateway: `auth
    --status` before any login, `auth fx` (its loopback listener gets the redirect), `auth wl` (a jwt_bearer grant
    has no browser step), a snippet once fx's access token expired (the connect refreshes it), `auth status` with
    each server's grant, scopes, expiry, last refresh and error and no secret, `auth --logout fx`, and a snippet
    and `servers` after it."""
    server = start_server()  # access tokens live 2 s
    m2m = {"client_id": "cc-client", "client_secret": "cc-secret", "issuer": server.base, "scopes": ["mcp"]}
    workload = {"grant": "jwt_bearer", "client_id": "w", "assertion_file": "missing.jwt", "issuer": server.base}
    servers = {
        "fx": {"url": server.url, "oauth": {"scopes": ["mcp"]}},
        "m2m": {"url": server.url, "oauth": m2m},
        "wl": {"url": server.url, "oauth": workload},
    }
    config = str(write_config(tmp_path, {"servers": servers}))

    status = onetool(tmp_path, "auth", "--status", "--config", config)
    assert status.returncode == 0
    assert re.search(
        r"^fx\s+authorization_code\s+false\s+pending_authorization\s+-\s+-\s+-\s+"
        r"authorization required: no stored tokens",
        status.stdout,
        re.M,
    )
    assert re.search(r"^m2m\s+client_credentials\s+false\s+authenticated", status.stdout, re.M)

    env = {**os.environ, "ONETOOL_STATE_DIR": str(tmp_path / "state")}
    with auth_command(Path(config), "fx", env) as (url, proc):
        assert url.startswith(f"{server.base}/authorize?")
        page = fetch(url)
        out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert page.status_code == 200 and "<b>fx</b>" in page.text
    assert "server 'fx': authorized; 3 tools" in out
    assert oauth_records(tmp_path) == ["fx", "m2m"]  # in the state store (m2m: client credentials), no file
    assert not (tmp_path / "state" / "oauth").exists()
    machine = onetool(tmp_path, "auth", "wl", "--config", config)
    assert machine.stdout.startswith("server 'wl' uses the jwt_bearer grant: there is no browser step")

    time.sleep(2.5)  # the access token expired: the next connect refreshes it
    snippet = (
        "[sorted((s['name'], s['oauth_status']) for s in proxy.list_servers()), fx.add(a=1, b=2), m2m.add(a=2, b=2)]"
    )
    ran = onetool(tmp_path, "run", "-c", snippet, "--config", config)
    assert ran.returncode == 0, ran.stderr
    authenticated = [["fx", "authenticated"], ["m2m", "authenticated"], ["wl", "authentication_failed"]]
    assert json.loads(ran.stdout) == [authenticated, 3, 4]

    status = onetool(tmp_path, "auth", "status", "--config", config)
    lines = status.stdout.splitlines()
    assert lines[0].split() == ["NAME", "GRANT", "DPOP", "OAUTH", "SCOPES", "EXPIRES", "REFRESHED", "ERROR"]
    when = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\dZ"
    rows = {line.split()[0]: line for line in lines[1:]}
    assert re.fullmatch(rf"fx\s+authorization_code\s+false\s+authenticated\s+mcp\s+{when}\s+{when}", rows["fx"]), rows[
        "fx"
    ]
    assert re.fullmatch(rf"m2m\s+client_credentials\s+false\s+authenticated\s+mcp\s+{when}\s+never", rows["m2m"]), rows
    missing = tmp_path / "missing.jwt"
    assert re.fullmatch(
        r"wl\s+jwt_bearer\s+false\s+authentication_failed\s+-\s+-\s+-\s+OAuth authentication failed: "
        r"servers\.wl\.oauth\.assertion_file cannot be read \(No such file or directory\)"
        rf" \({re.escape(str(missing))}\) - check servers\.wl\.oauth",
        rows["wl"],
    ), rows["wl"]
    assert [s for s in server.hook("secrets") if s in status.stdout + status.stderr] == []

    logout = onetool(tmp_path, "auth", "--logout", "fx", "--config", config)
    assert (logout.returncode, logout.stdout) == (0, "server 'fx': tokens and client registration forgotten\n")
    assert oauth_records(tmp_path) == ["m2m"]

    catch = "try:\n    fx.add(a=1, b=2)\nexcept ToolUnavailable as e:\n    caught = str(e)\ncaught"
    ran = onetool(tmp_path, "run", "-c", catch, "--config", config)
    assert ran.returncode == 0, ran.stderr
    assert "authorization required: no stored tokens; run `onetool auth fx`" in ran.stdout

    servers_table = onetool(tmp_path, "servers", "--config", config)
    assert re.search(r"^fx .*failed .*pending_authorization .*run `onetool auth fx`", servers_table.stdout, re.M)
    assert re.search(r"^m2m .*connected .*authenticated", servers_table.stdout, re.M)


def test_auth_names_the_oauth_servers_when_given_another(tmp_path: Path) -> None:
    config = str(write_config(tmp_path, {"servers": {"a": {"url": "http://127.0.0.1:9/mcp", "oauth": {}}}}))
    wrong = onetool(tmp_path, "auth", "nope", "--config", config)
    assert wrong.returncode == 2
    assert wrong.stderr == "onetool auth: 'nope' is not a server with an oauth block; OAuth servers: a\n"


def test_a_failed_authorization_without_a_gateway_says_why_without_a_traceback(
    start_server: Callable[..., OAuthServer],  # noqa: F811
    tmp_path: Path,
) -> None:
    server = start_server("--fail-exchange")
    config = write_config(tmp_path, {"servers": {"fx": {"url": server.url, "oauth": {}}}})
    env = {**os.environ, "ONETOOL_STATE_DIR": str(tmp_path / "state")}
    with auth_command(config, "fx", env) as (url, proc):
        fetch(url)  # the loopback listener of `onetool auth` gets the code; the exchange is refused
        _, err = proc.communicate(timeout=30)
    assert proc.returncode == 1
    assert "onetool auth: server 'fx': authorization failed: Token exchange failed (400)" in err
    assert "Traceback" not in err and "ExceptionGroup" not in err
