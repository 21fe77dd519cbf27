"""`direct.management`: what a model may do through /mcp/direct's management tools, in each mode, against a real
gateway (in-process, real upstream processes) and a real MCP client. A model never undoes an operator's decision."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
from mcp import Client

from onetool.config import Config, Management
from onetool.core.gateway import Gateway
from onetool.serve.direct import build_direct_server
from tests.conftest import FIXTURES, PYTHON
from tests.gateways import text_of

pytestmark = pytest.mark.anyio

FAULT = {"command": PYTHON, "args": [str(FIXTURES / "fault_server.py"), "ok"]}


@asynccontextmanager
async def face(mode: Management) -> AsyncIterator[tuple[Gateway, Client]]:
    """A gateway with one config-file server, `cfg`, and a client of its /mcp/direct face in ``mode``."""
    config = Config.model_validate({"servers": {"cfg": FAULT}, "direct": {"management": mode}})
    async with Gateway(config, warm_workers=0) as gateway, Client(build_direct_server(gateway, ":", mode)) as client:
        yield gateway, client


async def call(client: Client, operation: str, name: str | None = None, **more: Any) -> tuple[bool, str]:
    arguments = {"operation": operation, **({"name": name} if name else {}), **more}
    result = await client.call_tool("upstream_servers", arguments)
    return result.is_error, text_of(result)


async def test_read_only_lists_and_nothing_else() -> None:
    async with face("read-only") as (gateway, client):
        tools = {t.name: t for t in (await client.list_tools()).tools}
        assert "quarantine_security" not in tools
        schema = tools["upstream_servers"].input_schema
        assert schema["properties"] == {"operation": {"type": "string", "enum": ["list"]}}
        assert tools["upstream_servers"].annotations and tools["upstream_servers"].annotations.read_only_hint
        failed, text = await call(client, "list")
        assert not failed and '"name": "cfg"' in text
        failed, text = await call(client, "add", "new", spec=FAULT)
        assert failed and text.startswith(
            "upstream_servers: operation 'add' is not allowed here: direct.management is 'read-only' "
            "(upstream_servers operations allowed: list)"
        )
        assert "`direct.management: propose` in onetool.yaml" in text
        review = await client.call_tool("quarantine_security", {})
        assert review.is_error and "direct.management is 'read-only'" in text_of(review)
        assert [v.name for v in gateway.control.list()] == ["cfg"]


async def test_propose_adds_only_proposals_and_changes_nothing_that_runs() -> None:
    async with face("propose") as (gateway, client):
        enum = {t.name: t for t in (await client.list_tools()).tools}["upstream_servers"].input_schema
        assert enum["properties"]["operation"]["enum"] == ["list", "add"]
        assert not (await call(client, "add", "mine", spec=FAULT))[0]
        for operation in ("enable", "disable", "remove", "restart"):
            for name in ("cfg", "mine"):
                failed, text = await call(client, operation, name)
                assert failed and f"operation '{operation}' is not allowed here: direct.management is 'propose'" in text
        assert [(v.name, v.status) for v in gateway.control.list()] == [("cfg", "connected"), ("mine", "proposed")]
        assert "mine" not in gateway.pool


async def test_full_acts_only_on_what_the_model_added_and_no_operator_decided() -> None:
    async with face("full") as (gateway, client):
        control = gateway.control
        # Config-file servers are the operator's.
        for operation in ("disable", "restart", "remove"):
            failed, text = await call(client, operation, "cfg")
            assert failed and "server 'cfg' comes from the config file" in text
            assert f"a model may not {operation} it; only an operator can" in text
        # So are the servers an operator added.
        await control.add("theirs", FAULT, actor="cli")
        failed, text = await call(client, "disable", "theirs")
        assert failed and "server 'theirs' was added by an operator (cli): a model may not disable it" in text
        # Its own proposal: it may withdraw it, not start it.
        assert not (await call(client, "add", "mine", spec=FAULT))[0]
        failed, text = await call(client, "enable", "mine")
        assert failed and "server 'mine' is a proposal: nothing runs it until an operator approves it" in text
        assert "mine" not in gateway.pool
        await control.approve("mine", actor="api")
        # Approved to run: the model may disable and enable it again...
        assert not (await call(client, "disable", "mine"))[0]
        assert not (await call(client, "enable", "mine"))[0]
        assert not (await call(client, "restart", "mine"))[0]
        # ...until an operator decides whether it runs: that decision is not the model's to undo.
        await control.set_enabled("mine", False, actor="api")
        for operation in ("enable", "restart", "remove"):
            failed, text = await call(client, operation, "mine")
            assert failed and "an operator (api) decided whether server 'mine' runs" in text, text
        assert not control.get("mine").enabled
        assert [v.name for v in control.list()] == ["cfg", "theirs", "mine"]
        # A proposal no operator decided on, the model may withdraw.
        assert not (await call(client, "add", "another", spec=FAULT))[0]
        assert not (await call(client, "remove", "another"))[0]
        assert "another" not in [v.name for v in control.list()]
