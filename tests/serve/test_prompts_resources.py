"""Upstream prompts and resources on every MCP face: listed namespaced, got, read, paged, subscribed to and completed,
with list_changed in both eras, the tools' visibility, and what a hostile upstream wrote escaped and cut.

One `onetool serve --http` (run, direct and inspect faces) over server-everything (2025-era: prompts, resources,
templates, subscriptions, completions) and tests/fixtures/items_server.py (2026-era: hostile prompts and resources,
a huge one, a URI server-everything lists too, a tool that adds a prompt).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, MCPError
from mcp.server.subscriptions import PromptsListChanged, ResourcesListChanged, ResourceUpdated
from mcp.types import (
    INVALID_PARAMS,
    EmptyResult,
    PromptReference,
    ResourceTemplateReference,
    SubscribeRequest,
    SubscribeRequestParams,
    TextContent,
    TextResourceContents,
)

from onetool.serve._catalogue_items import LIST_WAIT, PAGE_SIZE, alias
from tests.admin_api import admin
from tests.conftest import EVERYTHING_JS, FIXTURES, PYTHON
from tests.fixtures.items_server import ESCAPED_URI, FLOOD, HUGE_CHARS, MANY, SHARED_URI
from tests.gateways import ServedGateway, processes_with, start_http_gateway, stop, text_of, wait_for_record

pytestmark = pytest.mark.anyio

MAX_OUTPUT = 20_000
EVERYTHING_PROMPTS = {"simple-prompt", "args-prompt", "completable-prompt", "resource-prompt"}
DOC = "demo://resource/static/document/features.md"
MODES = ["auto", "legacy"]


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServedGateway]:
    marker = f"items-{uuid.uuid4().hex}"
    env = {"ONETOOL_TEST_MARKER": marker}
    config = {
        "servers": {
            "everything": {"command": "node", "args": [str(EVERYTHING_JS), "stdio"], "env": env},
            "items": {"command": PYTHON, "args": [str(FIXTURES / "items_server.py")], "env": env},
        },
        "http": {"enable_direct_endpoint": True, "enable_inspect_endpoint": True},
        "sandbox": {"max_output": MAX_OUTPUT},
    }
    folder = tmp_path_factory.mktemp("items")
    # Its own runtime folder: the admin token is read from its discovery file there.
    gateway = start_http_gateway(folder, config, marker, env={"ONETOOL_RUNTIME_DIR": str(folder / "run")})
    yield gateway
    stop(gateway.proc)


def admin_post(served: ServedGateway, path: str, body: Any = None) -> int:
    [record] = (served.log.parent / "run" / "gateways").glob("*.json")
    return admin(served.url, "POST", path, body, token=json.loads(record.read_text())["admin_token"])[0]


def face_urls(served: ServedGateway) -> dict[str, str]:
    return {"run": served.url, "direct": f"{served.url}/direct", "inspect": f"{served.url}/inspect"}


def client(url: str, mode: str = "auto", **kwargs: Any) -> Client:
    return Client(url, mode=mode, read_timeout_seconds=60, **kwargs)  # type: ignore[arg-type]


async def all_pages(list_page: Any, field: str) -> list[Any]:
    items: list[Any] = []
    cursor = None
    while True:
        page = await list_page(cursor=cursor)
        items.extend(getattr(page, field))
        cursor = page.next_cursor
        if cursor is None:
            return items


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("face", ["run", "direct", "inspect"])
async def test_every_face_lists_the_upstreams_prompts_and_resources_namespaced(
    served: ServedGateway, face: str, mode: str
) -> None:
    async with client(face_urls(served)[face], mode) as c:
        capabilities = c.server_capabilities
        assert capabilities.prompts is not None and capabilities.prompts.list_changed
        assert capabilities.resources is not None and capabilities.resources.list_changed
        assert capabilities.resources.subscribe and capabilities.completions is not None
        prompts = {p.name: p for p in await all_pages(c.list_prompts, "prompts")}
        assert {f"everything:{name}" for name in EVERYTHING_PROMPTS} | {"items:brief"} <= set(prompts)
        assert [a.name for a in prompts["everything:args-prompt"].arguments or []] == ["city", "state"]
        resources = {r.uri: r for r in await all_pages(c.list_resources, "resources")}
        assert resources[DOC].name == "everything:features.md"
        assert resources["hostile://note"].name == "items:note"
        # Both list this URI: each is listed in the gateway's form, which names its server.
        assert SHARED_URI not in resources
        assert {alias("everything", SHARED_URI), alias("items", SHARED_URI)} <= set(resources)
        templates = {t.uri_template: t.name for t in (await c.list_resource_templates()).resource_templates}
        assert templates["demo://resource/dynamic/text/{resourceId}"] == "everything:Dynamic Text Resource"
        assert templates["hostile://items/{item}"] == "items:item"


@pytest.mark.parametrize("mode", MODES)
async def test_a_prompt_and_a_resource_round_trip(served: ServedGateway, mode: str) -> None:
    async with client(served.url, mode) as c:
        got = await c.get_prompt("everything:args-prompt", {"city": "Paris", "state": "IdF"})
        text = " ".join(m.content.text for m in got.messages if isinstance(m.content, TextContent))
        assert "Paris" in text and "IdF" in text
        [doc] = (await c.read_resource(DOC)).contents
        assert isinstance(doc, TextResourceContents) and doc.uri == DOC and doc.text
        # A URI no list names, routed by its server's template.
        [dynamic] = (await c.read_resource("demo://resource/dynamic/text/3")).contents
        assert isinstance(dynamic, TextResourceContents) and "3" in dynamic.text
        [item] = (await c.read_resource("hostile://items/seven")).contents
        assert isinstance(item, TextResourceContents) and item.text == "item seven"
        # The same URI of two servers, each read by the gateway's form.
        [ours] = (await c.read_resource(alias("items", SHARED_URI))).contents
        [theirs] = (await c.read_resource(alias("everything", SHARED_URI))).contents
        assert isinstance(ours, TextResourceContents) and ours.text == "the items server's architecture"
        assert isinstance(theirs, TextResourceContents) and theirs.text != ours.text


async def test_unknown_names_and_uris_say_what_exists(served: ServedGateway) -> None:
    async with client(served.url) as c:
        with pytest.raises(MCPError) as prompt:
            await c.get_prompt("everything:args-promt")
        message = prompt.value.error.message
        assert prompt.value.code == INVALID_PARAMS and "'everything:args-prompt'" in message and "items" in message
        with pytest.raises(MCPError) as resource:
            await c.read_resource("file:///etc/passwd")
        assert resource.value.code == INVALID_PARAMS and "servers with resources now: everything, items" in str(
            resource.value.error.message
        )
        with pytest.raises(MCPError) as ambiguous:
            await c.read_resource(SHARED_URI)
        assert alias("items", SHARED_URI) in ambiguous.value.error.message
        with pytest.raises(MCPError) as cursor:
            await c.list_resources(cursor="bm90IGEgY3Vyc29y")
        assert cursor.value.code == INVALID_PARAMS and "nextCursor" in cursor.value.error.message


@pytest.mark.parametrize("mode", MODES)
async def test_a_merged_list_is_paged(served: ServedGateway, mode: str) -> None:
    async with client(served.url, mode) as c:
        first = await c.list_resources()
        assert len(first.resources) == PAGE_SIZE and first.next_cursor is not None
        second = await c.list_resources(cursor=first.next_cursor)
        uris = [r.uri for page in (first, second) for r in page.resources]
        assert second.next_cursor is None and len(uris) == len(set(uris))
        assert {f"hostile://many/{n}" for n in range(MANY)} | {DOC, "hostile://note"} <= set(uris)


@pytest.mark.parametrize("mode", MODES)
async def test_hostile_prompts_and_resources_come_out_escaped_and_cut(served: ServedGateway, mode: str) -> None:
    async with client(f"{served.url}/direct", mode) as c:
        [brief] = [p for p in (await c.list_prompts()).prompts if p.name == "items:brief"]
        [note] = [r for r in (await c.list_resources()).resources if r.uri == "hostile://note"]
        got = await c.get_prompt("items:brief", {"topic": "cats"})
        [read] = (await c.read_resource("hostile://note")).contents
        assert isinstance(read, TextResourceContents)
        [message] = got.messages
        assert isinstance(message.content, TextContent)
        shown = [brief.title, brief.description, note.title, note.description, message.content.text, read.text]
        for text in shown:
            assert text is not None
            assert not any(ch in text for ch in "\x1b\x07\r\u202e"), repr(text)
        assert "<U+001B" in (brief.description or "") and "<U+202E RIGHT-TO-LEFT OVERRIDE>" in read.text
        assert "<U+000D" in message.content.text and "Write about cats" in message.content.text
        # A forged record stays text on its own line of the content: it is the upstream's, quoted.
        assert '"message": "proxy.tool.call"' in read.text
        # A name or URI with an escape is listed escaped, and what the client sends back reaches the upstream's own.
        [ask] = [p for p in (await c.list_prompts()).prompts if p.name == "items:ask"]
        [who] = ask.arguments or []
        assert who.name == "who<U+001B CONTROL>]0;pwned<U+0007 CONTROL>"
        asked = await c.get_prompt("items:ask", {who.name: "bob"})
        assert [m.content.text for m in asked.messages if isinstance(m.content, TextContent)] == ["asked bob"]
        listed = {r.name: r.uri for r in (await c.list_resources()).resources}
        assert listed["items:escaped"] == alias("items", ESCAPED_URI) and listed["items:escaped"].isascii()
        [escaped] = (await c.read_resource(listed["items:escaped"])).contents
        assert isinstance(escaped, TextResourceContents) and escaped.text == "read by its escaped URI"
        [huge] = (await c.read_resource("hostile://huge")).contents
        assert isinstance(huge, TextResourceContents)
        assert len(huge.text) < MAX_OUTPUT + 500 and f"showing {MAX_OUTPUT:,} of {HUGE_CHARS:,}" in huge.text


@pytest.mark.parametrize("mode", MODES)
async def test_completion_reaches_the_owning_server(served: ServedGateway, mode: str) -> None:
    async with client(served.url, mode) as c:
        done = await c.complete(
            PromptReference(name="everything:completable-prompt"), {"name": "department", "value": "E"}
        )
        assert "Engineering" in done.completion.values
        template = ResourceTemplateReference(uri="demo://resource/dynamic/text/{resourceId}")
        ids = await c.complete(template, {"name": "resourceId", "value": "1"})
        assert ids.completion.values and all(v.startswith("1") for v in ids.completion.values)


@contextlib.asynccontextmanager
async def hearing(
    url: str, mode: str, *methods: str, resources: list[str] | None = None
) -> AsyncIterator[tuple[Client, anyio.abc.ObjectReceiveStream[str]]]:
    """A client that records the notifications it hears of ``methods`` (a 2026-era one through its listen stream,
    asking for the prompts' and resources' changes and the updates of ``resources``, by default DOC's)."""
    send, receive = anyio.create_memory_object_stream[str](100)

    async def on_message(message: Any) -> None:
        method = getattr(message, "method", "")
        if method in methods:
            uri = getattr(getattr(message, "params", None), "uri", None)
            send.send_nowait(f"{method} {uri}" if uri else method)

    async with send, receive, client(url, mode, message_handler=on_message) as c, anyio.create_task_group() as tg:
        if mode == "auto":
            subscribed = resources or [DOC]
            listen = c.listen(prompts_list_changed=True, resources_list_changed=True, resource_subscriptions=subscribed)
            await tg.start(_pump, listen, send)
        try:
            yield c, receive
        finally:
            tg.cancel_scope.cancel()


async def _pump(listen: Any, send: Any, *, task_status: Any = anyio.TASK_STATUS_IGNORED) -> None:
    async with listen as events:
        task_status.started()
        async for event in events:
            if isinstance(event, PromptsListChanged):
                send.send_nowait("notifications/prompts/list_changed")
            elif isinstance(event, ResourcesListChanged):
                send.send_nowait("notifications/resources/list_changed")
            elif isinstance(event, ResourceUpdated):
                send.send_nowait(f"notifications/resources/updated {event.uri}")


async def heard(receive: anyio.abc.ObjectReceiveStream[str], wanted: str) -> None:
    with anyio.fail_after(20):
        while await receive.receive() != wanted:
            pass


async def hear_doc_updated(served: ServedGateway, notes: anyio.abc.ObjectReceiveStream[str]) -> None:
    """Have server-everything send its updates (of every subscribed URI at once, then every 5 s) until the client
    hears DOC's."""
    async with client(f"{served.url}/direct") as direct:
        await direct.call_tool("everything:toggle-subscriber-updates", {})
        try:
            await heard(notes, f"notifications/resources/updated {DOC}")
        finally:
            await direct.call_tool("everything:toggle-subscriber-updates", {})


@pytest.mark.parametrize("mode", MODES)
async def test_subscribed_updates_reach_the_client(served: ServedGateway, mode: str) -> None:
    updated = "notifications/resources/updated"
    written = served.log.stat().st_size
    async with hearing(served.url, mode, updated) as (c, notes):
        if mode == "legacy":
            # Sent as it is: the SDK's own method warns that the 2026 era dropped it.
            await c.session.send_request(SubscribeRequest(params=SubscribeRequestParams(uri=DOC)), EmptyResult)
        await hear_doc_updated(served, notes)
    # The client gone (its connection closed, or its listen stream ended), the server is told.
    unsubscribed = "resources/unsubscribe on 'everything'"
    await anyio.to_thread.run_sync(wait_for_record, served.log, unsubscribed, 30, written)


async def test_a_subscription_outlives_its_servers_reconnect(served: ServedGateway) -> None:
    async with hearing(served.url, "legacy", "notifications/resources/updated") as (c, notes):
        await c.session.send_request(SubscribeRequest(params=SubscribeRequestParams(uri=DOC)), EmptyResult)
        written = served.log.stat().st_size
        [node] = [pid for pid in processes_with(served.marker) if str(EVERYTHING_JS) in command_line(pid)]
        os.kill(node, signal.SIGKILL)
        await anyio.to_thread.run_sync(wait_for_record, served.log, "server 'everything' reconnected", 30, written)
        await hear_doc_updated(served, notes)


def command_line(pid: int) -> str:
    with contextlib.suppress(OSError):
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    return ""


@pytest.mark.parametrize("mode", MODES)
async def test_a_2026_era_servers_resource_updates_reach_subscribers_of_either_era(
    served: ServedGateway, mode: str
) -> None:
    """`items` speaks 2026-07-28: its updates come on the listen stream the gateway holds, opened again with each
    resource subscribed to, and are passed on as a handshake-era server's are."""
    touched = "hostile://many/1"
    updated = "notifications/resources/updated"
    async with hearing(served.url, mode, updated, resources=[touched]) as (c, notes):
        if mode == "legacy":
            await c.session.send_request(SubscribeRequest(params=SubscribeRequestParams(uri=touched)), EmptyResult)
        async with client(f"{served.url}/direct") as direct:
            assert text_of(await direct.call_tool("items:touch", {"uri": touched})) == "touched"
            await heard(notes, f"{updated} {touched}")
            # An update of a resource nobody here subscribed to reaches nobody: the next one heard is ours.
            assert text_of(await direct.call_tool("items:touch", {"uri": "hostile://many/2"})) == "touched"
            assert text_of(await direct.call_tool("items:touch", {"uri": touched})) == "touched"
            with anyio.fail_after(20):
                assert await notes.receive() == f"{updated} {touched}"


async def test_list_changed_reaches_both_eras_when_an_upstream_or_a_server_changes(served: ServedGateway) -> None:
    prompts, resources = "notifications/prompts/list_changed", "notifications/resources/list_changed"
    async with (
        hearing(served.url, "legacy", prompts, resources) as (legacy, old),
        hearing(f"{served.url}/direct", "auto", prompts, resources) as (modern, new),
    ):
        # A 2026-era upstream says its prompts changed.
        assert text_of(await modern.call_tool("items:grow", {})) == "grown"
        for notes in (old, new):
            await heard(notes, prompts)
        assert "items:later" in {p.name for p in (await legacy.list_prompts()).prompts}
        # A server disabled: its prompts and resources vanish, on every face, and both eras hear it.
        assert admin_post(served, "/admin/servers/everything/disable") == 200
        try:
            for notes in (old, new):
                await heard(notes, prompts)
                await heard(notes, resources)
            for c in (legacy, modern):
                names = {p.name for p in (await c.list_prompts()).prompts}
                assert not any(n.startswith("everything:") for n in names) and "items:brief" in names
                assert DOC not in {r.uri for r in (await c.list_resources()).resources}
            with pytest.raises(MCPError):
                await modern.get_prompt("everything:simple-prompt")
            with pytest.raises(MCPError):
                await legacy.read_resource(DOC)
        finally:
            assert admin_post(served, "/admin/servers/everything/enable") == 200
        for notes in (old, new):
            await heard(notes, resources)
        assert DOC in {r.uri for r in (await modern.list_resources()).resources}


async def test_a_flood_of_list_changes_reaches_clients_gathered(served: ServedGateway) -> None:
    prompts = "notifications/prompts/list_changed"
    async with hearing(served.url, "legacy", prompts) as (c, notes):
        assert text_of(await c.call_tool("run", {"code": "items.flood()"})) == "flooded"
        await heard(notes, prompts)
        # The gateway answers on, and what it passed on is a handful, not one per upstream notification.
        assert "items:brief" in {p.name for p in (await c.list_prompts()).prompts}
        told = 1
        with anyio.move_on_after(2):
            while True:
                await notes.receive()
                told += 1
        assert told < FLOOD // 10


@pytest.mark.parametrize("mode", MODES)
async def test_a_held_servers_prompts_and_resources_are_held_not_unknown(served: ServedGateway, mode: str) -> None:
    assert admin_post(served, "/admin/servers/items/quarantine") == 200
    try:
        async with client(served.url, mode) as c:
            assert not any(p.name.startswith("items:") for p in (await c.list_prompts()).prompts)
            assert "hostile://note" not in {r.uri for r in (await c.list_resources()).resources}
            for ask in (c.get_prompt("items:brief", {"topic": "x"}), c.read_resource(alias("items", "hostile://note"))):
                with pytest.raises(MCPError) as held:
                    await ask
                assert "server 'items' is unavailable: held for review by an operator" in held.value.error.message
    finally:
        assert admin_post(served, "/admin/servers/items/approve") == 200


async def test_a_server_hung_on_its_lists_is_left_out_of_them_not_waited_for(served: ServedGateway) -> None:
    """A connected server that never answers prompts/list or resources/list (its call timeout: two minutes) holds
    no client's listing past LIST_WAIT: the others' items are listed, its own next time it answers."""
    marker = f"stalled-{uuid.uuid4().hex}"
    stall = {"ITEMS_STALL": "prompts/list,resources/list", "ONETOOL_TEST_MARKER": marker}
    spec = {"command": PYTHON, "args": [str(FIXTURES / "items_server.py")], "env": stall, "timeout": 120}
    assert admin_post(served, "/admin/servers", {"name": "stalled", "spec": spec}) == 201
    try:
        with anyio.fail_after(60):
            while "stalled" not in text_of(await served.run("[s['name'] for s in proxy.list_servers() if s['tools']]")):
                await anyio.sleep(0.1)
        written = served.log.stat().st_size
        # A second client lists right after the first: the hung server is not asked (nor waited for) again.
        for _ in range(2):
            async with client(served.url, "auto") as c:  # its reads time out at 60 s: well short of the 120 s
                prompts = {p.name for p in await all_pages(c.list_prompts, "prompts")}
                resources = {r.name for r in await all_pages(c.list_resources, "resources")}
            assert "items:brief" in prompts and not [n for n in prompts if n.startswith("stalled")]
            assert "items:note" in resources and not [n for n in resources if n.startswith("stalled")]
        log = served.log.read_bytes()[written:].decode()
        for kind in ("prompts", "resources"):
            said = f"server 'stalled': its {kind} are not listed: no answer within {LIST_WAIT} s; not asked again for "
            assert log.count(said) == 1, log
    finally:
        [record] = (served.log.parent / "run" / "gateways").glob("*.json")
        token = json.loads(record.read_text())["admin_token"]
        assert admin(served.url, "DELETE", "/admin/servers/stalled", token=token)[0] == 200
    assert processes_with(marker) == []
