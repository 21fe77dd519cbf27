"""FastMCP 4.2.3 on both sides of a real `onetool serve --http`, as users run it: its client (which speaks
2026-07-28) asked (forms and URL mode), sampled and listed for roots by the upstream of its call, and shown the
upstreams' prompts and resources; a FastMCP upstream whose tool asks with ``ctx.elicit`` answered by the client of
the run, whatever client that is (FastMCP, or the `mcp` SDK in either era). FastMCP 4.2.3 servers have no
``ctx.sample``, and their ``ctx.elicit`` works on handshake-era connections only: `servers.NAME.protocol:
"2025-11-25"` is how a user runs such a server behind OneTool."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from fastmcp import Client as FastMCPClient
from fastmcp.client.sampling import SamplingMessage, SamplingParams
from mcp import Client, types
from mcp.client.session import ClientRequestContext

from tests.conftest import EVERYTHING_JS, FIXTURES, PYTHON
from tests.gateways import ServedGateway, start_http_gateway, stop, text_of

pytestmark = pytest.mark.anyio

CLIENT_ROOT = "file:///home/user/fastmcp-project"
CONFIG_ROOT = "file:///srv/fastmcp-configured"
README = "onetool://fm/note%3A%2F%2Ffixture%2Freadme"
"""The fixture's resource as the gateway lists it: fm and fm_auto both list note://fixture/readme."""


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServedGateway]:
    """The FastMCP fixture twice (`fm` on the handshake era, `fm_auto` as a user would first configure it),
    server-everything, and the SDK fixture `elicit` (2026-07-28: it asks in input-required results)."""
    marker = f"fastmcp-{uuid.uuid4().hex}"
    env = {"ONETOOL_TEST_MARKER": marker}
    fm = {"command": PYTHON, "args": [str(FIXTURES / "fastmcp_server.py")], "env": env, "timeout": 20}
    config: dict[str, Any] = {
        "servers": {
            "fm": {**fm, "protocol": "2025-11-25"},
            "fm_auto": fm,
            "everything": {"command": "node", "args": [str(EVERYTHING_JS), "stdio"], "env": env, "timeout": 20},
            "elicit": {"command": PYTHON, "args": [str(FIXTURES / "elicit_server.py")], "env": env, "timeout": 20},
        },
        "sandbox": {"timeout": 25},
        "roots": [CONFIG_ROOT],
    }
    gateway = start_http_gateway(tmp_path_factory.mktemp("fastmcp"), config, marker)
    try:
        yield gateway
    finally:
        assert stop(gateway.proc) == 0


class FastMCPUser:
    """The user and the model behind a FastMCP client: answers each question and each sampling request, and
    remembers them."""

    def __init__(self) -> None:
        self.asked: list[str] = []
        self.opened: list[str] = []
        self.sampled: list[SamplingParams] = []

    async def elicit(self, message: str, response_type: Any, params: Any, context: Any) -> Any:
        self.asked.append(message)
        if isinstance(params, types.ElicitRequestURLParams):
            self.opened.append(params.url)  # the user opened the page and finished there
            return {}
        return response_type(value="Ada")

    async def sample(self, messages: list[SamplingMessage], params: SamplingParams, context: Any) -> str:
        self.sampled.append(params)
        return f"a haiku from the FastMCP client ({len(self.sampled)})"


def fastmcp_client(served: ServedGateway, user: FastMCPUser) -> FastMCPClient[Any]:
    return FastMCPClient(
        served.url,
        elicitation_handler=user.elicit,
        sampling_handler=user.sample,
        roots=[CLIENT_ROOT],
        timeout=60,
    )


async def test_the_fastmcp_client_is_asked_sampled_and_listed_for_roots_by_the_upstream_of_its_run(
    served: ServedGateway,
) -> None:
    user = FastMCPUser()
    async with fastmcp_client(served, user) as client:
        assert client.protocol_version == "2026-07-28"
        sampled = await client.call_tool(
            "run", {"code": "everything.trigger_sampling_request(prompt='a haiku', maxTokens=40)"}
        )
        assert "a haiku from the FastMCP client (1)" in text_of(sampled), text_of(sampled)
        [params] = user.sampled
        assert params.max_tokens == 40 and params.system_prompt is not None
        assert params.system_prompt.startswith("[OneTool] MCP server 'everything'")

        # Roots asked during the call are the client's; server-everything asked when it connected, with no call in
        # flight: the config's.
        roots = await client.call_tool("run", {"code": "elicit.roots()"})
        assert text_of(roots) == f'["{CLIENT_ROOT}"]', text_of(roots)
        roots = await client.call_tool("run", {"code": "everything.get_roots_list()"})
        assert CONFIG_ROOT.removeprefix("file://") in text_of(roots), text_of(roots)

        asked = await client.call_tool("run", {"code": "fm.ask_name()"})
        assert text_of(asked) == "hello Ada"
        assert user.asked and "What is your name?" in user.asked[-1] and "'fm'" in user.asked[-1]

        # URL mode: the page to open goes as the upstream sent it, the message says who asks.
        code = "everything.trigger_url_elicitation(url='https://consent.example/flow?id=7')"
        opened = await client.call_tool("run", {"code": code})
        assert user.opened == ["https://consent.example/flow?id=7"], text_of(opened)
        assert "'everything'" in user.asked[-1] and "accept" in text_of(opened), text_of(opened)


async def test_the_fastmcp_client_sees_a_fastmcp_upstreams_prompts_and_resources(served: ServedGateway) -> None:
    async with fastmcp_client(served, FastMCPUser()) as client:
        prompts = {p.name: p for p in await client.list_prompts()}
        assert "fm:greeting" in prompts and [a.name for a in prompts["fm:greeting"].arguments or []] == ["name"]
        got = await client.get_prompt("fm:greeting", {"name": "Ada"})
        assert [m.content.text for m in got.messages if isinstance(m.content, types.TextContent)] == [
            "Say hello to Ada."
        ]
        uris = {str(r.uri) for r in await client.list_resources()}
        assert README in uris, uris
        [content] = await client.read_resource(README)
        assert isinstance(content, types.TextResourceContents) and content.text == "the fixture's readme"


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_a_fastmcp_upstreams_question_reaches_the_client_of_the_run_in_either_era(
    served: ServedGateway, mode: str
) -> None:
    asked: list[str] = []

    async def answer(context: ClientRequestContext, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={"value": f"Grace ({mode})"})

    async with Client(served.url, mode=mode, read_timeout_seconds=60, elicitation_callback=answer) as client:
        result = await client.call_tool("run", {"code": "fm.ask_name()"})
    assert text_of(result) == f"hello Grace ({mode})"
    assert len(asked) == 1 and "What is your name?" in asked[0]


async def test_a_fastmcp_tool_that_asks_on_a_2026_connection_fails_and_says_why(served: ServedGateway) -> None:
    """What a user meets before setting `protocol: "2025-11-25"`: FastMCP's own error, which names the era."""
    result = await served.run("fm_auto.ask_name()")
    assert result.is_error and "unavailable on 2026-07-28 connections" in text_of(result), text_of(result)
