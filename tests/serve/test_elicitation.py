"""An upstream asks the client of its call something mid-call: through a real `onetool serve --http`, a question
for its user (elicitation), a completion of its model (sampling) or its roots go to the MCP client whose call
triggered it (run, direct and exec faces), and the answer back to the upstream; a client that cannot be asked
gets the unattended answer (decline; with `unattended_elicitation: defaults`, a form's defaults when every field
has one), a sampling request the protocol's error, roots/list the config's `roots:`. The upstreams:
tests/fixtures/elicit_server.py (2026-07-28: the request rides an input-required result) and server-everything
(2025-11-25: a server-to-client request)."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from typing import Any

import anyio
import pytest
from mcp import Client, MCPError, types
from mcp.client.session import ClientRequestContext
from pydantic import FileUrl

from onetool.upstream.asks import QUESTIONS_PER_RUN, SAMPLED_BY
from onetool.upstream.elicit import ASKED_BY
from tests.conftest import EVERYTHING_JS, FIXTURES, PYTHON
from tests.gateways import ServedGateway, start_http_gateway, stop, text_of

pytestmark = pytest.mark.anyio

DEFAULTS = {"name": "John Doe", "age": 30, "verified": True}
ROOT = "file:///srv/configured"
"""The gateway's configured root: what an upstream gets when the client of its call has none to give."""
CLIENT_ROOT = "file:///home/user/project"


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
            "strict": {**elicit, "sampling": "deny"},
            "everything": everything,
            "hasty": {**elicit, "timeout": 2},
        },
        "http": {"enable_direct_endpoint": True, "enable_inspect_endpoint": True},
        "sandbox": {"timeout": 15},
        "sampling": {"max_requests": 3, "max_tokens": 1000},
        "roots": [ROOT],
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


class Model:
    """A downstream client's model: completes each sampling request and remembers it."""

    def __init__(self) -> None:
        self.asked: list[types.CreateMessageRequestParams] = []

    async def __call__(
        self, context: ClientRequestContext, params: types.CreateMessageRequestParams
    ) -> types.CreateMessageResult:
        self.asked.append(params)
        text = types.TextContent(type="text", text=f"haiku {len(self.asked)}")
        return types.CreateMessageResult(role="assistant", content=text, model="client-model")


async def client_roots(context: ClientRequestContext) -> types.ListRootsResult:
    return types.ListRootsResult(roots=[types.Root(uri=FileUrl(CLIENT_ROOT), name="project")])


async def call(
    url: str,
    tool: str,
    arguments: dict[str, Any],
    user: User | None,
    model: Model | None = None,
    roots: Any = None,
) -> types.CallToolResult:
    """``tool`` on the face at ``url`` from a handshake-era client, which can elicit when ``user`` is given,
    sample with ``model``, and list ``roots``."""
    async with Client(
        url,
        mode="legacy",
        read_timeout_seconds=30,
        elicitation_callback=user,
        sampling_callback=model,
        list_roots_callback=roots,
    ) as client:
        return await client.call_tool(tool, arguments)


def outcome(result: types.CallToolResult) -> dict[str, Any]:
    """What the fixture's tool reports: the action its question got and the content, from a result's text."""
    assert not result.is_error, text_of(result)
    text = text_of(result)
    return json.loads(text[text.index("{") : text.rindex("}") + 1].replace('\\"', '"'))


def reported(result: types.CallToolResult) -> Any:
    """What the fixture's tool returned (a JSON text), as every face passes it on."""
    assert not result.is_error, text_of(result)
    text = text_of(result)
    return json.loads(json.loads(text) if text.startswith('"') else text)


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


async def test_a_run_puts_a_bounded_number_of_questions_to_its_user(eliciting: ServedGateway) -> None:
    """An upstream asking again and again (a flood) cannot keep the user busy: past QUESTIONS_PER_RUN in a run, a
    question gets the unattended answer, and the log says why."""
    user = User(types.ElicitResult(action="accept", content={"text": "yes"}))
    code = f"import json\njson.dumps([json.loads(strict.note())['action'] for _ in range({QUESTIONS_PER_RUN + 2})])"
    result = await call(eliciting.url, "run", {"code": code}, user)
    assert reported(result) == ["accept"] * QUESTIONS_PER_RUN + ["decline"] * 2
    assert len(user.asked) == QUESTIONS_PER_RUN
    assert f"server 'strict' asked its user: not asked: this run's questions are spent ({QUESTIONS_PER_RUN}" in (
        eliciting.log.read_text()
    )


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


async def test_2026_era_client_is_asked_through_input_required_results(eliciting: ServedGateway) -> None:
    """A 2026-07-28 client takes no server-to-client requests: its tools/call gets an input-required result, and
    its retry with the answer continues the same call (the SDK's Client drives the loop)."""
    user = User(types.ElicitResult(action="accept", content={"text": "hi"}))
    async with Client(eliciting.url, read_timeout_seconds=30, elicitation_callback=user) as client:
        assert client.protocol_version == "2026-07-28"
        result = await client.call_tool("run", {"code": "elicit.note()"})
        assert outcome(result) == {"action": "accept", "content": {"text": "hi"}}
        # A handshake-era upstream (a server-to-client request), from direct and from exec.
        result = await client.call_tool("run", {"code": "everything.trigger_elicitation_request()"})
        assert "It was a dark and stormy night." in text_of(result), text_of(result)
    [_, asked] = user.asked
    assert asked.message.startswith(ASKED_BY.format("everything"))
    model = Model()
    async with Client(
        face(eliciting, "direct"), read_timeout_seconds=30, sampling_callback=model, list_roots_callback=client_roots
    ) as client:
        result = await client.call_tool("everything:trigger-sampling-request", {"prompt": "p", "maxTokens": 10})
        assert "haiku 1" in text_of(result), text_of(result)
        assert reported(await client.call_tool("elicit:haiku", {"max_tokens": 10})) == {
            "model": "client-model",
            "text": "haiku 2",
        }
        assert reported(await client.call_tool("elicit:roots", {})) == [CLIENT_ROOT]
    user = User(types.ElicitResult(action="accept", content={"text": "from exec"}))
    async with Client(face(eliciting, "inspect"), read_timeout_seconds=30, elicitation_callback=user) as client:
        result = await client.call_tool("exec", {"server_name": "elicit", "tool_name": "note"})
    assert outcome(result) == {"action": "accept", "content": {"text": "from exec"}}


async def test_a_2026_era_client_that_does_not_come_back_in_time_gets_the_calls_end(eliciting: ServedGateway) -> None:
    """The question is the upstream's, attributed, in an input-required result; it waits no longer than its call
    (2 s on `hasty`), which then ends without the answer and keeps its result for the client's retry."""
    user = User(types.ElicitResult(action="accept", content={"text": "never asked: this test answers by hand"}))
    async with Client(face(eliciting, "direct"), read_timeout_seconds=30, elicitation_callback=user) as client:
        first = await client.session.call_tool("hasty:note", {}, allow_input_required=True)
        assert isinstance(first, types.InputRequiredResult) and first.request_state
        [(key, request)] = (first.input_requests or {}).items()
        assert isinstance(request, types.ElicitRequest)
        assert request.params.message == f"{ASKED_BY.format('hasty')}\n| Please write a note"
        await anyio.sleep(3)  # past the call's timeout
        late = {key: types.ElicitResult(action="accept", content={"text": "too late"})}
        result = await client.session.call_tool(
            "hasty:note", {}, input_responses=late, request_state=first.request_state, allow_input_required=True
        )
    assert isinstance(result, types.CallToolResult)
    assert outcome(result) == {"action": "cancel", "content": None}


async def test_a_2026_era_retry_with_a_forged_state_is_refused(eliciting: ServedGateway) -> None:
    async with Client(eliciting.url, read_timeout_seconds=30) as client:
        with pytest.raises(MCPError, match="requestState names no call waiting for input here"):
            await client.session.call_tool(
                "run", {"code": "1"}, request_state="forged", input_responses={}, allow_input_required=True
            )


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
    """The protocol does not say which call a request belongs to: with two in flight, a question gets the
    unattended answer, a sampling request the protocol's error and roots/list the config's roots; no client is
    asked on another's behalf."""
    user = User(types.ElicitResult(action="accept", content={"text": "mine?"}))
    model = Model()
    async with anyio.create_task_group() as tg:
        tg.start_soon(call, face(eliciting, "direct"), "elicit:quiet", {"seconds": 4}, None)
        await anyio.sleep(1)
        result = await call(face(eliciting, "direct"), "elicit:note", {}, user)
        sampled = await call(face(eliciting, "direct"), "elicit:haiku", {"max_tokens": 10}, None, model)
        roots = await call(face(eliciting, "direct"), "elicit:roots", {}, None, roots=client_roots)
    assert outcome(result) == {"action": "decline", "content": None}
    assert user.asked == []
    assert sampled.is_error and model.asked == []
    assert reported(roots) == [ROOT]
    assert "refused: no client to ask: sampling goes to the client of a call to server 'elicit'" in (
        eliciting.log.read_text()
    )


# ----- sampling and roots --------------------------------------------------------------------------------------


async def test_every_tool_of_server_everything_is_offered(eliciting: ServedGateway) -> None:
    """The gateway declares sampling, elicitation and roots to its upstreams, so server-everything offers them all."""
    async with Client(face(eliciting, "direct"), mode="legacy", read_timeout_seconds=30) as client:
        names = {t.name for t in (await client.list_tools()).tools if t.name.startswith("everything:")}
    assert len(names) == 17, sorted(names)
    assert {"everything:trigger-sampling-request", "everything:get-roots-list"} <= names


async def test_sampling_goes_to_the_calling_client_of_either_era_of_upstream(eliciting: ServedGateway) -> None:
    model = Model()
    code = "everything.trigger_sampling_request(prompt='a haiku', maxTokens=50)"
    result = await call(eliciting.url, "run", {"code": code}, None, model)
    assert not result.is_error, text_of(result)
    assert "haiku 1" in text_of(result) and "client-model" in text_of(result)
    [asked] = model.asked
    assert asked.max_tokens == 50 and "a haiku" in str(asked.messages[0].content)
    # The user approving it learns which server asks; the server's own instructions follow, quoted.
    assert asked.system_prompt == f"{SAMPLED_BY.format('everything')}\n| You are a helpful test server."
    # A 2026-era upstream's request rides its input-required result; direct and exec callers are asked the same.
    result = await call(face(eliciting, "direct"), "elicit:haiku", {"max_tokens": 20}, None, model)
    assert reported(result) == {"model": "client-model", "text": "haiku 2"}
    arguments = {"server_name": "elicit", "tool_name": "haiku", "arguments": {"max_tokens": 20}}
    result = await call(face(eliciting, "inspect"), "exec", arguments, None, model)
    assert reported(result) == {"model": "client-model", "text": "haiku 3"}


async def test_sampling_that_cannot_pass_is_refused_at_once_and_logged(eliciting: ServedGateway) -> None:
    # A client that did not declare sampling.
    result = await call(eliciting.url, "run", {"code": "everything.trigger_sampling_request(prompt='x')"}, None)
    assert result.is_error and "did not declare the sampling capability" in text_of(result)
    # servers.strict.sampling: deny: the client is never asked.
    model = Model()
    result = await call(face(eliciting, "direct"), "strict:haiku", {"max_tokens": 20}, None, model)
    assert result.is_error and model.asked == []
    log = eliciting.log.read_text()
    assert "server 'strict' asked to sample: refused: sampling is denied to server 'strict'" in log
    assert "server 'everything' asked to sample: refused: the client of this call did not declare" in log


async def test_a_run_samples_within_its_share(eliciting: ServedGateway) -> None:
    """A run that makes its upstreams ask again and again (a flooding upstream) gets sampling.max_requests of
    them passed; the rest are refused without reaching the client, and so is a request for more tokens than the
    run has left (sampling.max_tokens)."""
    model = Model()
    code = (
        "out = []\n"
        "for i in range(5):\n"
        "    try:\n"
        "        everything.trigger_sampling_request(prompt='again', maxTokens=10)\n"
        "        out.append('ok')\n"
        "    except ToolError as e:\n"
        "        out.append('refused' if 'sampling requests are spent' in str(e) else str(e))\n"
        "out"
    )
    result = await call(eliciting.url, "run", {"code": code}, None, model)
    assert reported(result) == ["ok", "ok", "ok", "refused", "refused"]
    assert len(model.asked) == 3
    # The share is the run's: the next run has its own.
    result = await call(face(eliciting, "direct"), "elicit:haiku", {"max_tokens": 5000}, None, model)
    assert result.is_error and len(model.asked) == 3
    assert "max_tokens 5000 is more than this run has left (1000 of 1000" in eliciting.log.read_text()


async def test_roots_are_the_calling_clients_else_the_configs(eliciting: ServedGateway) -> None:
    result = await call(face(eliciting, "direct"), "elicit:roots", {}, None, roots=client_roots)
    assert reported(result) == [CLIENT_ROOT]
    result = await call(eliciting.url, "run", {"code": "elicit.roots()"}, None)
    assert reported(result) == [ROOT]
    # server-everything lists roots when it connects, with no call in flight: the config's.
    result = await call(face(eliciting, "direct"), "everything:get-roots-list", {}, None)
    assert ROOT.removeprefix("file://") in text_of(result)


async def test_a_clients_roots_list_changed_reaches_the_upstreams(eliciting: ServedGateway) -> None:
    """server-everything lists roots again when told they changed."""
    before = eliciting.log.read_text().count("server 'everything' listed roots")
    async with Client(eliciting.url, mode="legacy", read_timeout_seconds=30, list_roots_callback=client_roots) as c:
        await c.session.send_notification(types.RootsListChangedNotification())
        with anyio.fail_after(20):
            while eliciting.log.read_text().count("server 'everything' listed roots") == before:
                await anyio.sleep(0.1)
