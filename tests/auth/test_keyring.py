"""`oauth.store: keyring`: a server's tokens in the OS keyring (here keyrings.alt's file backend, which the keyring
package picks on a machine without a desktop secret store), end to end: `onetool auth` through the running gateway,
a restart, a refresh, `onetool auth status` and `--logout`; nothing in the state store, nothing secret in the log."""

from __future__ import annotations

import os
import re
import subprocess
import time
import uuid
from collections.abc import Callable
from pathlib import Path

from keyrings.alt.file import PlaintextKeyring

from onetool.auth.store import KeyringTokenStore
from tests.auth.test_auth_cli import oauth_records
from tests.gateways import ONETOOL, auth_command, start_http_gateway, stop, text_of
from tests.upstream.test_oauth import OAuthServer, fetch, start_server  # noqa: F401 (fixture)


def keyring_entry(path: Path, server: str, url: str) -> str | None:
    backend = PlaintextKeyring()
    backend.file_path = str(path)
    return backend.get_password(KeyringTokenStore.SERVICE, f"{server} {url}")


async def test_tokens_in_the_os_keyring_across_a_restart_a_refresh_status_and_logout(
    start_server: Callable[..., OAuthServer],  # noqa: F811
    tmp_path: Path,
) -> None:
    server = start_server()  # access tokens live 2 s
    env = {
        "ONETOOL_STATE_DIR": str(tmp_path / "state"),
        "PYTHON_KEYRING_BACKEND": "keyrings.alt.file.PlaintextKeyring",
        "XDG_DATA_HOME": str(tmp_path / "data"),  # where that backend keeps its file
    }
    keyring_file = tmp_path / "data" / "python_keyring" / "keyring_pass.cfg"
    config = {"servers": {"fx": {"url": server.url, "oauth": {"store": "keyring"}, "connect_timeout": 5}}}
    served = start_http_gateway(tmp_path, config, uuid.uuid4().hex, env=env)
    try:
        with auth_command(tmp_path / "onetool.yaml", "fx", {**os.environ, **env, "LOG_LEVEL": "WARNING"}) as (
            url,
            proc,
        ):
            fetch(url)
            _, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
        entry = keyring_entry(keyring_file, "fx", server.url)
        assert entry is not None and '"refresh_token"' in entry
        assert oauth_records(tmp_path) == []  # not in the state store
        stop(served.proc)
        served = start_http_gateway(tmp_path, config, uuid.uuid4().hex, env=env)
        time.sleep(2.5)  # expired: the call refreshes, and the new tokens go to the keyring
        assert text_of(await served.run("fx.add(a=1, b=2)")) == "3"
    finally:
        stop(served.proc)
    assert keyring_entry(keyring_file, "fx", server.url) != entry
    log = served.log.read_text()
    assert [s for s in server.hook("secrets") if s in log] == []

    def onetool(*args: str) -> subprocess.CompletedProcess[str]:
        cmd = [ONETOOL, *args, "--config", str(tmp_path / "onetool.yaml")]
        return subprocess.run(cmd, env={**os.environ, **env}, capture_output=True, text=True, timeout=60)

    status = onetool("auth", "status")
    when = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\dZ"
    row = rf"^fx\s+authorization_code\s+false\s+authenticated\s+-\s+{when}\s+{when}"
    assert re.search(row, status.stdout, re.M), status
    logout = onetool("auth", "fx", "--logout")
    assert logout.stdout == "server 'fx': tokens and client registration forgotten\n", logout
    assert keyring_entry(keyring_file, "fx", server.url) is None
