"""What of the gateway's environment a stdio upstream gets: the documented list (proxies, CA certificates, locale,
folders), never a secret; the server's own `env:` wins; and nothing of it is logged but the names."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from onetool.upstream.environment import PASSED_NAMES, PASSED_PREFIXES
from tests.readme import README
from tests.upstream.conftest import fault, open_pool

PROXY = "http://alice:pr0xy-s3cret@proxy.example:3128"
PASSED = {
    "HTTPS_PROXY": PROXY,
    "http_proxy": PROXY,
    "NO_PROXY": "localhost,127.0.0.1",
    "SSL_CERT_FILE": "/etc/corp/ca.pem",
    "NODE_EXTRA_CA_CERTS": "/etc/corp/ca.pem",
    "REQUESTS_CA_BUNDLE": "/etc/corp/ca.pem",
    "LANG": "de_DE.UTF-8",
    "LC_ALL": "de_DE.UTF-8",
    "TZ": "Europe/Berlin",
    "XDG_CONFIG_HOME": "/home/alice/.config",
}
KEPT = {
    "GITHUB_TOKEN": "ghp-never-passed",
    "AWS_SECRET_ACCESS_KEY": "aws-never-passed",
    "ONETOOL_ADMIN_TOKEN": "admin-never-passed",
    "XDG_SESSION_COOKIE": "cookie-never-passed",  # a prefix that passes, a name that reads as a secret's
    "LC_FAKE": "() { echo a shell function; }",  # bash would define it in any shell the server starts
    "SOME_SETTING": "not on the list",
}


async def test_a_stdio_server_gets_the_documented_variables_and_no_secret(
    monkeypatch: pytest.MonkeyPatch, log_records: list[dict[str, Any]]
) -> None:
    for name, value in {**PASSED, **KEPT}.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("TZ_OWN", "x")
    servers = {"env": fault(env={"TZ": "UTC", "GITHUB_TOKEN": "${GITHUB_TOKEN}"})}
    async with open_pool(servers) as pool:
        result = await pool.call("env", "environment", {})
    environ = result.structured_content  # what the child process itself reports
    assert {name: environ.get(name) for name in PASSED} == {**PASSED, "TZ": "UTC"}  # its own env: wins
    assert environ["GITHUB_TOKEN"] == "${GITHUB_TOKEN}"  # only what its entry names (a pool takes values as given)
    assert not {name for name in KEPT if name != "GITHUB_TOKEN"} & set(environ)
    assert "TZ_OWN" not in environ
    allowed = {*PASSED_NAMES, "GITHUB_TOKEN", "TZ", "ONETOOL_GATEWAYS"}
    assert {name for name in environ if not name.startswith(PASSED_PREFIXES)} <= allowed
    # The log names what passed, never a value: the proxy's credentials stay out of it.
    logged = json.dumps(log_records, default=str)
    assert "pr0xy-s3cret" not in logged and "HTTPS_PROXY" in logged


def test_the_readme_names_exactly_what_passes() -> None:
    text = README.read_text()
    paragraph = text[text.index("**What a stdio server gets from the environment.**") :].split("\n\n", 1)[0]
    listed = paragraph.split("Nothing else passes", 1)[0]
    named = re.findall(r"`([A-Za-z_]+\*?)`", listed)
    assert sorted(named) == sorted([*PASSED_NAMES, *(f"{prefix}*" for prefix in PASSED_PREFIXES)])
