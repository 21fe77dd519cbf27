"""A server an operator holds for review (quarantined, or proposed by a model and not approved) is listed nowhere,
and a caller that names it hears so on every face: "held for review by an operator", never "unknown" (a disabled
one says "unavailable: disabled"). A real gateway (in-process, real upstreams) and real MCP clients."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from mcp import Client

from onetool.config import Config
from onetool.core.gateway import Gateway
from onetool.serve.direct import build_direct_server
from onetool.serve.inspect import build_inspect_server
from onetool.serve.run import build_run_server
from tests.conftest import FIXTURES, PYTHON
from tests.gateways import text_of

pytestmark = pytest.mark.anyio

FAULT = {"command": PYTHON, "args": [str(FIXTURES / "fault_server.py"), "ok"]}
HELD = "server 'held' is unavailable: held for review by an operator (quarantined)"
PROPOSED = "server 'idea' is unavailable: held for review by an operator (proposed)"


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
async def gateway() -> AsyncIterator[Gateway]:
    config = Config.model_validate({"servers": {"fx": FAULT, "held": FAULT}, "http": {"enable_direct_endpoint": True}})
    async with Gateway(config, warm_workers=1) as gateway:
        await gateway.control.quarantine("held", actor="cli")
        await gateway.control.add("idea", FAULT, actor="mcp")  # a model's proposal: nothing runs yet
        yield gateway


async def run(gateway: Gateway, code: str) -> Any:
    result = await gateway.run(code)
    return result.structured_content["result"] if not result.is_error and result.structured_content else text_of(result)


@pytest.mark.parametrize(
    ("call", "said"),
    [
        ("held.echo(message='x')", HELD),
        ("idea.echo(message='x')", PROPOSED),
        ("proxy.call('held', 'echo', {'message': 'x'})", HELD),
        ("proxy.list_tools(server='held')", HELD),
        ("proxy.list_resources('idea')", PROPOSED),
        ("proxy.describe('held.echo')", HELD),
    ],
)
async def test_a_snippet_hears_the_server_is_held_and_may_catch_it(gateway: Gateway, call: str, said: str) -> None:
    caught = await run(gateway, f"try:\n    {call}\nexcept ToolUnavailable as e:\n    r = [str(e), e.origin]\nr")
    assert caught[0].startswith(said) and caught[1] == "host", caught
    uncaught = await gateway.run(call)
    assert uncaught.is_error and said in text_of(uncaught) and "unknown" not in text_of(uncaught).lower()


async def test_the_servers_are_listed_nowhere(gateway: Gateway) -> None:
    assert [s["name"] for s in await run(gateway, "proxy.list_servers()")] == ["fx"]
    description = gateway.describe_run()
    assert "\nfx:" in description and "held" not in description and "idea" not in description


async def test_the_other_faces_say_so_too(gateway: Gateway) -> None:
    async with Client(build_inspect_server(gateway)) as inspect:
        described = await inspect.call_tool("inspect", {"server_name": "held"})
        executed = await inspect.call_tool("exec", {"server_name": "idea", "tool_name": "echo"})
    async with Client(build_direct_server(gateway), mode="legacy") as direct:
        called = await direct.call_tool("held:echo", {"message": "x"})
        assert "held:echo" not in [t.name for t in (await direct.list_tools()).tools]
    async with Client(build_run_server(gateway)) as run_face:
        misdirected = await run_face.call_tool("held:echo", {"message": "x"})
    for result, said in ((described, HELD), (executed, PROPOSED), (called, HELD), (misdirected, HELD)):
        assert result.is_error and said in text_of(result), text_of(result)


async def test_a_direct_name_on_the_run_face_names_the_direct_endpoint_and_the_snippet(gateway: Gateway) -> None:
    async with Client(build_run_server(gateway)) as client:
        known = text_of(await client.call_tool("fx:echo", {"message": "x"}))
        other = text_of(await client.call_tool("nope", {}))
    assert known.startswith("Unknown tool 'fx:echo': this endpoint has one tool, `run`")
    assert "connect to /direct/mcp on this gateway (also /mcp/direct" in known
    assert "call `run` with code `fx.echo(...)`" in known
    assert other == "Unknown tool 'nope': this endpoint has one tool, `run`, which runs Python code."
