"""What /mcp/direct lists while servers come and go, against a real gateway (in-process, real upstream processes)
and a real MCP client: with every server disabled or quarantined only the management tools are left, and a
server that crashes and reconnects while a client lists in a loop is never shown with part of its tools."""

from __future__ import annotations

import anyio
import pytest
from mcp import Client

from onetool.config import Config
from onetool.core.gateway import Gateway
from onetool.serve.direct import build_direct_server
from tests.conftest import FIXTURES, PYTHON

pytestmark = pytest.mark.anyio

MANAGEMENT = ["run", "upstream_servers", "quarantine_security", "read_cache", "search_tools"]


def fault(mode: str = "ok") -> dict[str, object]:
    return {"command": PYTHON, "args": [str(FIXTURES / "fault_server.py"), mode]}


def connected(gateway: Gateway, server: str) -> bool:
    status = gateway.registry.server_status(server)
    return status is not None and status.connected


async def listed(client: Client) -> list[str]:
    return [t.name for t in (await client.list_tools()).tools]


async def test_every_server_disabled_or_quarantined_leaves_exactly_the_management_tools() -> None:
    config = Config.model_validate({"servers": {"a": fault(), "b": fault()}})
    async with Gateway(config, warm_workers=0) as gateway, Client(build_direct_server(gateway)) as client:
        names = await listed(client)
        assert sorted(names[: len(MANAGEMENT)]) == sorted(MANAGEMENT)
        assert {n.split(":")[0] for n in names[len(MANAGEMENT) :]} == {"a", "b"}
        await gateway.control.set_enabled("a", False, actor="cli")
        await gateway.control.quarantine("b", actor="cli")
        assert sorted(await listed(client)) == sorted(MANAGEMENT)
        await gateway.control.set_enabled("a", True, actor="cli")
        with anyio.fail_after(20):
            while not any(n.startswith("a:") for n in await listed(client)):
                await anyio.sleep(0.05)


async def test_a_server_cycling_while_a_client_lists_is_never_shown_in_part() -> None:
    config = Config.model_validate({"servers": {"fx": fault("crash")}})
    async with Gateway(config, warm_workers=0) as gateway, Client(build_direct_server(gateway)) as client:
        full = sorted(n for n in await listed(client) if n.startswith("fx:"))
        assert len(full) > 5
        seen: set[tuple[str, ...]] = set()
        cycles = 0

        async def lister() -> None:
            while True:
                seen.add(tuple(sorted(n for n in await listed(client) if n.startswith("fx:"))))
                await anyio.sleep(0)

        async with anyio.create_task_group() as tg:
            tg.start_soon(lister)
            with anyio.fail_after(60):
                while cycles < 3:
                    await client.call_tool("fx:crash", {})  # the process dies mid-call; the pool reconnects it
                    while not connected(gateway, "fx"):
                        await anyio.sleep(0.02)
                    cycles += 1
            tg.cancel_scope.cancel()
        assert seen <= {tuple(full), ()}, f"partial tool sets were listed: {seen - {tuple(full), ()}}"
        assert tuple(full) in seen
