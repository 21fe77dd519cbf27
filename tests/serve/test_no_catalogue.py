"""The gateway as a server has no prompts or resources: it declares both capabilities and answers their lists with
empty lists (not -32601), and a prompt or resource asked by name with -32602, in both protocol eras."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from mcp import Client, MCPError
from mcp.types import INVALID_PARAMS

from tests.gateways import ServedGateway, start_http_gateway, stop


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServedGateway]:
    gateway = start_http_gateway(tmp_path_factory.mktemp("gw"), {"servers": {}}, f"gw-{uuid.uuid4().hex}")
    yield gateway
    stop(gateway.proc)


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_prompts_and_resources_are_declared_and_listed_empty(served: ServedGateway, mode: str) -> None:
    async with Client(served.url, mode=mode, read_timeout_seconds=30) as client:  # type: ignore[arg-type]
        assert client.protocol_version == ("2025-11-25" if mode == "legacy" else "2026-07-28")
        capabilities = client.server_capabilities
        assert capabilities.prompts is not None and capabilities.resources is not None
        assert (await client.list_prompts()).prompts == []
        assert (await client.list_resources()).resources == []
        assert (await client.list_resource_templates()).resource_templates == []
        assert [t.name for t in (await client.list_tools()).tools] == ["run"]
        with pytest.raises(MCPError) as prompt:
            await client.get_prompt("summarise")
        assert prompt.value.code == INVALID_PARAMS and "OneTool offers no prompts" in prompt.value.error.message
        with pytest.raises(MCPError) as resource:
            await client.read_resource("file:///etc/hosts")
        assert resource.value.code == INVALID_PARAMS and "offers no resources" in resource.value.error.message
