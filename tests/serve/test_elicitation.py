"""An upstream asks its user something mid-call (elicitation): through a real `onetool serve --http`, the question
goes to the MCP client whose call triggered it (run, direct and exec faces), and its answer back to the upstream;
a client that cannot be asked gets the unattended answer (decline; with `unattended_elicitation: defaults`, a
form's defaults when every field has one). The upstreams: tests/fixtures/elicit_server.py (2026-07-28: the
question rides an input-required result) and server-everything (2025-11-25: a server-to-client request)."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from typing import Any

import anyio
import pytest
from mcp import Client, types
from mcp.client.session import ClientRequestContext

from onetool.upstream.elicit import ASKED_BY
from tests.conftest import EVERYTHING_JS, FIXTURES, PYTHON
from tests.gateways import ServedGateway, start_http_gateway, stop, text_of

pytestmark = pytest.mark.anyio

DEFAULTS = {"name": "John Doe", "age": 30, "verified": True}


@pytest.fixture(scope="module")
def eliciting(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServedGateway]:
    """A gateway with /mcp/direct and /mcp/inspect on, and the upstreams `elicit` (unattended: its defaults;
    `strict`: the same server, declined; `hasty`: with a 2 s call timeout) and `everything`."""
    marker = f"elicit-{uuid.uuid4().hex}"
    env = {"ONETOOL_TEST_MARKER": marker}
    elicit = {"command": PYTHON, "args": [str(FIXTURES / "elicit_server.py")], "env": env, "timeout": 10}
    everything = {"command": "node", "args": [str(EVERYTHING_JS), "stdio"], "env": env, "timeout": 10}
    config: dict[str, Any] = {
        "servers": {
            "elicit": {**elicit, "unattended_elicitation": "defaults"},
            "strict": elicit,
            "everything": everything,
            "hasty": {**elicit, "timeout": 2},
        },
        "http": {"enable_direct_endpoint": True, "enable_inspect_endpoint": True},
        "sandbox": {"timeout": 15},
    }
    served = start_http_gateway(tmp_path_factory.mktemp("elicit"), config, marker)
    try:
        yield served
    finally:
        assert stop(served.proc) == 0


class User:
    """A downstream client's user: answers each question with ``answer`` and remembers what was asked."""

    def __init__(self, answer: types.ElicitResult) -> None:
        self.answer = answer
        self.asked: list[types.ElicitRequestParams] = []

    async def __call__(self, context: ClientRequestContext, params: types.ElicitRequestParams) -> types.ElicitResult:
        self.asked.append(params)
        return self.answer


async def call(url: str, tool: str, arguments: dict[str, Any], user: User | None) -> types.CallToolResult:
    """``tool`` on the face at ``url`` from a handshake-era client, which can elicit when ``user`` is given."""
    async with Client(url, mode="legacy", read_timeout_seconds=30, elicitation_callback=user) as client:
        return await client.call_tool(tool, arguments)


def outcome(result: types.CallToolResult) -> dict[str, Any]:
    """What the fixture's tool reports: the action its question got and the content, from a result's text."""
    assert not result.is_error, text_of(result)
    text = text_of(result)
    return json.loads(text[text.index("{") : text.rindex("}") + 1].replace('\\"', '"'))


def face(served: ServedGateway, name: str) -> str:
    return served.url.removesuffix("/mcp") + f"/mcp/{name}"


async def test_run_client_answers_and_omitted_fields_get_defaults(eliciting: ServedGateway) -> None:
    user = User(types.ElicitResult(action="accept", content={"name": "Ann"}))
    result = await call(eliciting.url, "run", {"code": "elicit.profile()"}, user)
    assert outcome(result) == {"action": "accept", "content": {**DEFAULTS, "name": "Ann"}}
    [asked] = user.asked
    assert isinstance(asked, types.ElicitRequestFormParams)
    # Under the gateway's own first line naming the server as configured; the upstream's words quoted below.
    assert asked.message == f"{ASKED_BY.format('elicit')}\n| Please confirm your profile"
    assert asked.requested_schema["properties"]["age"]["default"] == 30
    assert "Please confirm" not in text_of(result)  # the question never reaches the model


async def test_proxy_call_asks_the_run_client_as_a_pack_call_does(eliciting: ServedGateway) -> None:
    """`proxy.call` (for tool names that are not identifiers) is the same call: its question reaches the same user."""
    user = User(types.ElicitResult(action="accept", content={"name": "Bo"}))
    result = await call(eliciting.url, "run", {"code": "proxy.call('strict', 'profile')"}, user)
    assert outcome(result) == {"action": "accept", "content": {**DEFAULTS, "name": "Bo"}}
    assert len(user.asked) == 1
    assert "Please confirm" not in text_of(result)  # the question never reaches the model, this way either


async def test_handshake_era_upstream_gets_the_answer_with_defaults(eliciting: ServedGateway) -> None:
    """server-everything asks with a server-to-client request; the fields the user left out that have a default
    reach it with the default (SEP-1034)."""
    user = User(types.ElicitResult(action="accept", content={"name": "Ann", "check": True}))
    result = await call(eliciting.url, "run", {"code": "everything.trigger_elicitation_request()"}, user)
    text = text_of(result)
    assert not result.is_error, text
    assert "Ann" in text and "It was a dark and stormy night." in text and "Monica" in text
    [asked] = user.asked
    assert asked.message == f"{ASKED_BY.format('everything')}\n| Please provide inputs for the following fields:"


@pytest.mark.parametrize("action", ["decline", "cancel"])
async def test_decline_and_cancel_flow_back(eliciting: ServedGateway, action: str) -> None:
    user = User(types.ElicitResult(action=action))  # type: ignore[arg-type]
    result = await call(eliciting.url, "run", {"code": "elicit.note()"}, user)
    assert outcome(result) == {"action": action, "content": None}
    assert len(user.asked) == 1


async def test_client_that_cannot_elicit_gets_the_unattended_answer(eliciting: ServedGateway) -> None:
    # Nobody answers for a person by default, not even a form of defaults.
    assert outcome(await call(eliciting.url, "run", {"code": "strict.profile()"}, None)) == {
        "action": "decline",
        "content": None,
    }
    # unattended_elicitation: defaults: every field has a default, accepted with them; a field without, declined.
    assert outcome(await call(eliciting.url, "run", {"code": "elicit.profile()"}, None)) == {
        "action": "accept",
        "content": DEFAULTS,
    }
    assert outcome(await call(eliciting.url, "run", {"code": "elicit.note()"}, None)) == {
        "action": "decline",
        "content": None,
    }


async def test_2026_era_client_gets_the_unattended_answer(eliciting: ServedGateway) -> None:
    """A 2026-07-28 client takes no server-to-client requests."""
    user = User(types.ElicitResult(action="accept", content={"text": "hi"}))
    async with Client(eliciting.url, mode="auto", read_timeout_seconds=30, elicitation_callback=user) as client:
        result = await client.call_tool("run", {"code": "elicit.note()"})
    assert outcome(result) == {"action": "decline", "content": None}
    assert user.asked == []


async def test_direct_and_exec_callers_answer(eliciting: ServedGateway) -> None:
    user = User(types.ElicitResult(action="accept", content={"text": "from direct"}))
    result = await call(face(eliciting, "direct"), "elicit:note", {}, user)
    assert outcome(result) == {"action": "accept", "content": {"text": "from direct"}}
    user = User(types.ElicitResult(action="accept", content={"text": "from exec"}))
    result = await call(face(eliciting, "inspect"), "exec", {"server_name": "elicit", "tool_name": "note"}, user)
    assert outcome(result) == {"action": "accept", "content": {"text": "from exec"}}
    # A local pack's tool through exec: proxy.call makes the upstream call, and exec's caller still answers.
    user = User(types.ElicitResult(action="accept", content={"text": "via proxy"}))
    arguments = {"server_name": "proxy", "tool_name": "call", "arguments": {"server": "strict", "tool": "note"}}
    result = await call(face(eliciting, "inspect"), "exec", arguments, user)
    assert outcome(result) == {"action": "accept", "content": {"text": "via proxy"}}
    assert len(user.asked) == 1


async def test_a_question_waits_no_longer_than_its_call(eliciting: ServedGateway) -> None:
    class Away(User):
        async def __call__(
            self, context: ClientRequestContext, params: types.ElicitRequestParams
        ) -> types.ElicitResult:
            self.asked.append(params)
            await anyio.sleep(60)
            return self.answer

    user = Away(types.ElicitResult(action="accept", content={"text": "too late"}))
    start = time.monotonic()
    result = await call(face(eliciting, "direct"), "hasty:note", {}, user)
    assert time.monotonic() - start < 10
    assert len(user.asked) == 1 and "too late" not in text_of(result)


async def test_with_another_call_in_flight_nobody_is_asked(eliciting: ServedGateway) -> None:
    """The protocol does not say which call a question belongs to: with two in flight, the unattended answer."""
    user = User(types.ElicitResult(action="accept", content={"text": "mine?"}))
    async with anyio.create_task_group() as tg:
        tg.start_soon(call, face(eliciting, "direct"), "elicit:quiet", {"seconds": 3}, None)
        await anyio.sleep(1)
        result = await call(face(eliciting, "direct"), "elicit:note", {}, user)
    assert outcome(result) == {"action": "decline", "content": None}
    assert user.asked == []
