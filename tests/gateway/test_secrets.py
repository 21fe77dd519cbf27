"""Secrets in the gateway's config reach upstreams, never a snippet's result or the log."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from tests.conftest import EVERYTHING_JS, free_port
from tests.gateways import start_http_gateway, stop, text_of

pytestmark = pytest.mark.anyio

SECRET = f"canary-{uuid.uuid4().hex}"

PROBES = [
    "proxy.list_servers()",
    "proxy.list_tools(server='brave')",
    "proxy.list_tools(server='dead')",
    "dead.anything()",
    "proxy.call('dead', 'x', {})",
    "import os\nos.environ",
    "().__class__.__mro__[1].__subclasses__()",
    "[getattr(proxy, n) for n in ('_ctx', '__globals__', 'ctx')]",
    "proxy.list_servers.__globals__",
    "{s['name']: s for s in proxy.list_servers()}['dead']['error']",
]


async def test_secrets_never_reach_snippets_or_logs(tmp_path: Path) -> None:
    config = {
        "servers": {
            "brave": {
                "command": "node",
                "args": [str(EVERYTHING_JS), "stdio"],
                "env": {"API_TOKEN": "${ONETOOL_TEST_SECRET}"},
            },
            # A dead HTTP upstream: its failure is reported, its Authorization header is not.
            "dead": {
                "url": f"http://127.0.0.1:{free_port()}/mcp?token=${{ONETOOL_TEST_SECRET}}",
                "headers": {"Authorization": "Bearer ${ONETOOL_TEST_SECRET}"},
                "connect_timeout": 3,
            },
        }
    }
    served = start_http_gateway(tmp_path, config, f"sec-{uuid.uuid4().hex}", env={"ONETOOL_TEST_SECRET": SECRET})
    try:
        for code in PROBES:
            result = await served.run(code)
            assert SECRET not in text_of(result), code
            assert SECRET not in str(result.structured_content), code
        # the upstream itself did receive it
        env = await served.run("brave.get_env()")
        assert SECRET in text_of(env)
    finally:
        assert stop(served.proc) == 0
    log = served.log.read_text()
    assert "dead" in log and "proxy.connect" in log
    assert SECRET not in log
