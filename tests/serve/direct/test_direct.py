"""/mcp/direct: every visible upstream tool as server:tool, against a real `onetool serve --http` and real upstreams.

Clients of both protocol eras; upstream definitions and results compared with the upstream's own answers;
list_changed timed; the spec's edge cases (duplicate names, a server with no tools, a tool named like a management
tool, reconnect, disabled and failed servers, long names, the separator) each have a test. Tests marked
``needs_control`` exercise the control plane (enable, disable, add, quarantine) and run once it is merged.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import re
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import pytest
from mcp import Client, StdioServerParameters, stdio_client, types
from mcp.client.session import ClientRequestContext
from mcp.types import SERVER_INFO_META_KEY

from onetool.control import EXECUTION_ENV
from onetool.serve import RUN_INPUT_SCHEMA
from onetool.serve.direct import MAX_NAME, direct_names
from onetool.serve.direct._cache import OUTPUT_SCHEMA_NOTE, keeps_output_schema
from onetool.serve.direct._face import DirectCatalogue
from onetool.text import unseen
from tests.conftest import EVERYTHING_JS, FIXTURES, PYTHON, TIME_SERVER
from tests.eras import era_clients
from tests.fixtures.rug_server import POISONED
from tests.gateways import ServedGateway, start_http_gateway, stop, text_of

pytestmark = pytest.mark.anyio

MODES = ["auto", "legacy"]
needs_control = pytest.mark.skipif(
    importlib.util.find_spec("onetool.control") is None, reason="needs the control plane (issue 10, helper A)"
)

EVERYTHING = {"command": "node", "args": [str(EVERYTHING_JS), "stdio"]}
TIME = {"command": TIME_SERVER, "args": ["--local-timezone", "UTC"]}
FAULT = {"command": PYTHON, "args": [str(FIXTURES / "fault_server.py"), "ok"]}
LONG = "a-server-name-long-enough-to-push-its-tool-names-past-sixty-four"
ADMIN_TOKEN = f"admin-{uuid.uuid4().hex}"


@dataclass(frozen=True)
class Direct:
    served: ServedGateway
    folder: Path

    @property
    def url(self) -> str:
        return direct_url(self.served)

    def client(self, mode: str = "auto", **kwargs: Any) -> Client:
        return Client(self.url, mode=mode, read_timeout_seconds=60, **kwargs)  # type: ignore[arg-type]

    def admin(self, path: str, method: str = "POST") -> None:
        """A request to the admin API, as an operator would make it (the CLI does the same)."""
        request = urllib.request.Request(
            self.served.url.removesuffix("/mcp") + path,
            data=b"{}",
            method=method,
            headers={"Authorization": f"Bearer {ADMIN_TOKEN}", "Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=30) as response:
            assert response.status == 200

    def log_lines(self, pattern: str) -> list[str]:
        return [line for line in self.served.log.read_text().splitlines() if pattern in line]


def direct_url(served: ServedGateway) -> str:
    return served.url.removesuffix("/mcp") + "/mcp/direct"


@pytest.fixture(scope="module")
def direct(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Direct]:
    """A gateway with /mcp/direct on: `fx` for calls, `fx2` to change (add tools, crash), and servers that list
    nothing (disabled, failing, empty)."""
    folder = tmp_path_factory.mktemp("direct")
    marker = f"direct-{uuid.uuid4().hex}"
    env = {"ONETOOL_TEST_MARKER": marker}
    config = {
        "http": {"enable_direct_endpoint": True},
        "servers": {
            "everything": {**EVERYTHING, "env": env},
            "time": {**TIME, "env": env},
            "fx": {**FAULT, "env": {**env, "CANCEL_LOG": str(folder / "cancel.log")}, "timeout": 20},
            "fx2": {**FAULT, "env": env, "timeout": 1},
            "empty": {"command": PYTHON, "args": [str(FIXTURES / "empty_server.py")], "env": env},
            "broken-server": {"command": "/nonexistent/mcp-server", "connect_timeout": 5},
            "off": {**FAULT, "enabled": False},
        },
    }
    served = start_http_gateway(folder, config, marker, env={"ONETOOL_ADMIN_TOKEN": ADMIN_TOKEN})
    try:
        yield Direct(served, folder)
    finally:
        assert stop(served.proc) == 0


@contextlib.asynccontextmanager
async def upstream(server: dict[str, Any], mode: str) -> AsyncIterator[Client]:
    """A client straight to an upstream, as the gateway's pool connects it: the reference to compare with."""
    params = StdioServerParameters(command=server["command"], args=server["args"])
    with open(os.devnull, "w") as devnull:
        async with Client(
            stdio_client(params, errlog=devnull),
            mode=mode,  # type: ignore[arg-type]
            read_timeout_seconds=30,
            # The pool declares elicitation, sampling and roots: server-everything lists 4 more tools.
            elicitation_callback=_never_asked,
            sampling_callback=_never_sampled,
            list_roots_callback=_no_roots,
        ) as client:
            yield client


async def _never_asked(context: ClientRequestContext, params: types.ElicitRequestParams) -> types.ElicitResult:
    return types.ElicitResult(action="decline")


async def _never_sampled(context: ClientRequestContext, params: types.CreateMessageRequestParams) -> types.ErrorData:
    return types.ErrorData(code=types.INVALID_REQUEST, message="not here")


async def _no_roots(context: ClientRequestContext) -> types.ListRootsResult:
    return types.ListRootsResult(roots=[])


async def names(client: Client) -> list[str]:
    return [t.name for t in (await client.list_tools()).tools]


async def wait_for_names(client: Client, present: bool, prefix: str, timeout: float = 15) -> list[str]:
    """Lists until some name starts with ``prefix`` (present) or none does; the last listing."""
    with anyio.fail_after(timeout):
        while True:
            listed = await names(client)
            if any(n.startswith(prefix) for n in listed) == present:
                return listed
            await anyio.sleep(0.1)


# ---- naming (in-process) ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("separator", [":", "__", "."])
def test_short_names_are_server_separator_tool(separator: str) -> None:
    mapping = direct_names([("github", "create_issue"), ("fs", "read_file")], separator)
    assert mapping == {
        f"github{separator}create_issue": ("github", "create_issue"),
        f"fs{separator}read_file": ("fs", "read_file"),
    }


def test_long_names_are_shortened_deterministically_uniquely_and_stably() -> None:
    tools = [(LONG, f"tool_number_{i}_with_a_long_descriptive_name") for i in range(50)]
    mapping = direct_names(tools, "__")
    assert sorted(mapping.values()) == sorted(tools)
    assert all(re.fullmatch(r"[a-zA-Z0-9_-]{1,64}", n) for n in mapping), mapping
    assert direct_names(tools, "__") == mapping
    # One tool's name does not depend on the others: a listing that gains or loses tools renames none.
    assert direct_names(tools[10:20], "__") == {n: t for n, t in mapping.items() if t in tools[10:20]}


def test_a_name_taken_by_another_tool_gets_a_different_unique_one() -> None:
    long_tool = ("s", "x" * 80)
    (shortened,) = direct_names([long_tool], ":")
    # A tool whose natural name is exactly that shortened name keeps it; the long one moves.
    squatter = ("s", shortened.removeprefix("s:"))
    mapping = direct_names([long_tool, squatter], ":")
    assert mapping[shortened] == squatter and len(mapping) == 2
    assert all(len(n) <= MAX_NAME for n in mapping)
    # Two natural names that coincide ("a.b" + "c" and "a" + "b.c"): the first keeps it, the second gets a hash.
    dotted = direct_names([("a.b", "c"), ("a", "b.c")], ".")
    assert dotted["a.b.c"] == ("a.b", "c") and len(dotted) == 2


@pytest.mark.parametrize("separator", [":", "__", "."])
def test_a_name_outside_the_mcp_charset_is_renamed_into_it_stably_and_uniquely(separator: str) -> None:
    """SEP-986: a tool name is 1-128 of A-Z a-z 0-9 _ . -. A server's or a tool's name with a terminal escape, a quote
    and a newline, a space, a bidi override or a dot-free Unicode letter is listed within it, never raw; a name that
    is renamed keeps its new name across listings, and two that differ only by such characters stay apart."""
    tools = [
        ("evil", "esc\x1b]0;title\x07"),
        ("evil", 'quote"\nnewline'),
        ("evil", "get weather"),
        ("evil", "get\u202eweather"),
        ("evil", "café"),
        ("evil", "get_weather"),
        ("my server", "ok"),
    ]
    mapping = direct_names(tools, separator)
    assert sorted(mapping.values()) == sorted(tools)
    part = r"[A-Za-z0-9_.-]+"
    assert all(re.fullmatch(f"{part}{re.escape(separator)}{part}", n) and len(n) <= MAX_NAME for n in mapping)
    assert mapping[f"evil{separator}get_weather"] == ("evil", "get_weather")  # a name within it is kept as it is
    assert direct_names(list(reversed(tools)), separator) == mapping  # stable, whatever the order
    renamed = {pair: name for name, pair in mapping.items()}
    assert renamed[("evil", "get weather")].startswith(f"evil{separator}get_weather_")
    assert renamed[("my server", "ok")].startswith("my_server_")


def test_renamed_tools_are_warned_of_once_per_change_not_on_every_rebuild(log_records: list[dict[str, Any]]) -> None:
    def tool(name: str) -> types.Tool:
        return types.Tool(name=name, input_schema={"type": "object"})

    def warned() -> list[str]:
        return [r["extra"]["server"] for r in log_records if r["level"] == "WARNING" and "renamed" in r["message"]]

    first = DirectCatalogue({"evil": [tool("get weather")], "fine": [tool("ok")]}, ":")
    assert warned() == ["evil"]
    again = DirectCatalogue({"evil": [tool("get weather")], "fine": [tool("ok"), tool("more")]}, ":", first)
    assert warned() == ["evil"]  # the catalogue changed, evil's renamed tools did not
    DirectCatalogue({"evil": [tool("get weather"), tool("new one")], "fine": [tool("ok")]}, ":", again)
    assert warned() == ["evil", "evil"]


def test_a_management_tool_name_is_never_given_to_an_upstream_tool() -> None:
    mapping = direct_names([("x", "y")], ":", reserved={"x:y"})
    ((name, pair),) = mapping.items()
    assert pair == ("x", "y") and name != "x:y"


# ---- the endpoint ---------------------------------------------------------------------------------------------


def test_off_by_default_is_404(gateway: ServedGateway) -> None:
    request = urllib.request.Request(
        direct_url(gateway), data=b"{}", method="POST", headers={"Content-Type": "application/json"}
    )
    with pytest.raises(urllib.error.HTTPError) as caught:
        urllib.request.urlopen(request, timeout=10)
    caught.value.close()
    assert caught.value.code == 404
    assert "direct endpoint on" not in gateway.log.read_text()


def test_startup_log_says_it_is_on(direct: Direct) -> None:
    (line,) = direct.log_lines("direct endpoint on")
    assert direct.url in line
    assert f"(also at {direct.url.removesuffix('/mcp/direct')}/direct/mcp)" in line


@pytest.mark.parametrize("mode", MODES)
async def test_the_same_face_answers_at_a_path_that_ends_in_mcp(direct: Direct, mode: str) -> None:
    # The MCP Inspector's CLI rewrites a URL whose path does not end in /mcp.
    alias = direct.url.removesuffix("/mcp/direct") + "/direct/mcp"
    async with Client(alias, mode=mode, read_timeout_seconds=60) as client, direct.client(mode) as at_path:  # type: ignore[arg-type]
        assert await names(client) == await names(at_path)
        answer = await client.call_tool("fx:echo", {"message": "alias"})
    assert not answer.is_error and "alias" in str(answer.content[0])


@pytest.mark.parametrize("mode", MODES)
async def test_lists_management_tools_then_every_visible_upstream_tool(direct: Direct, mode: str) -> None:
    async with direct.client(mode) as client, upstream(EVERYTHING, mode) as ev, upstream(TIME, mode) as tm:
        listed = await names(client)
        expected_everything = [f"everything:{n}" for n in await names(ev)]
        expected_time = [f"time:{n}" for n in await names(tm)]
    assert listed[:5] == ["run", "upstream_servers", "quarantine_security", "read_cache", "search_tools"]
    assert [n for n in listed if n.startswith("everything:")] == expected_everything
    assert [n for n in listed if n.startswith("time:")] == expected_time
    assert {"fx:echo", "fx:sleep", "fx2:add_tool"} <= set(listed)
    assert len(listed) == len(set(listed))
    # Disabled, failing and toolless servers list nothing; no name goes unprefixed beyond the management tools.
    servers = {n.split(":", 1)[0] for n in listed[5:]}
    assert servers == {"everything", "time", "fx", "fx2"}


@pytest.mark.parametrize("mode", MODES)
async def test_definitions_are_the_upstreams_own(direct: Direct, mode: str) -> None:
    """Title, description, schemas, icons, _meta and every annotation, as the upstream lists them; but an
    outputSchema no cut result would match, which is left out and said so (a cut result stays a success)."""
    async with direct.client(mode) as client:
        listed = {t.name: t for t in (await client.list_tools()).tools}
        # `execution` exists only in the 2025-11-25 era: a 2026-era client cannot be sent it.
        differ_by_era = {"name"} | ({"execution"} if client.protocol_version == "2026-07-28" else set())
    compared = dropped = 0
    for server, spec in (("everything", EVERYTHING), ("time", TIME)):
        async with upstream(spec, mode) as up:
            originals = (await up.list_tools()).tools
        for original in originals:
            mine = listed[f"{server}:{original.name}"]
            if original.output_schema is not None and not keeps_output_schema(original.output_schema):
                assert mine.output_schema is None and (mine.description or "").endswith(OUTPUT_SCHEMA_NOTE)
                dropped += 1
                original = original.model_copy(update={"output_schema": None, "description": mine.description})
            assert mine.model_dump(exclude=differ_by_era) == original.model_dump(exclude=differ_by_era), original.name
            for hint in ("title", "read_only_hint", "destructive_hint", "idempotent_hint", "open_world_hint"):
                theirs = getattr(original.annotations, hint, None)
                assert getattr(mine.annotations, hint, None) == theirs, (original.name, hint)
            compared += 1
    assert compared == 19  # everything 17 (with its elicitation, sampling and roots tools), time 2
    # The fixtures do use the fields compared above.
    annotated = [t for n, t in listed.items() if n.startswith("everything:") and t.annotations]
    assert any(t.annotations and t.annotations.read_only_hint for t in annotated)
    assert dropped >= 2  # time:get_current_time and everything:get-structured-content declare one


CALLS = [
    ("everything", EVERYTHING, "echo", {"message": "hi"}),
    ("everything", EVERYTHING, "get-sum", {"a": 2, "b": 40}),
    ("everything", EVERYTHING, "get-structured-content", {"location": "Chicago"}),
    ("everything", EVERYTHING, "get-tiny-image", {}),
    ("everything", EVERYTHING, "get-annotated-message", {"messageType": "error", "includeImage": True}),
    ("everything", EVERYTHING, "get-resource-links", {"count": 2}),
    ("time", TIME, "convert_time", {"source_timezone": "UTC", "time": "12:00", "target_timezone": "Asia/Tokyo"}),
]


def unstamped(result: types.CallToolResult) -> dict[str, Any]:
    dumped = result.model_dump()
    meta = {k: v for k, v in (dumped.pop("meta") or {}).items() if k != SERVER_INFO_META_KEY}
    return {**dumped, "meta": meta}


@pytest.mark.parametrize("mode", MODES)
async def test_results_are_the_upstreams_own(direct: Direct, mode: str) -> None:
    async with direct.client(mode) as client:
        await client.list_tools()  # the client checks structured results against listed output schemas
        got = [await client.call_tool(f"{server}:{tool}", args) for server, _, tool, args in CALLS]
    for name, spec in (("everything", EVERYTHING), ("time", TIME)):  # one session per upstream, as the gateway has
        async with upstream(spec, mode) as up:
            await up.list_tools()
            for (server, _, tool, args), mine in zip(CALLS, got, strict=True):
                if server != name:
                    continue
                theirs = await up.call_tool(tool, args)
                # Nothing here depends on the clock. The 2026 era's serverInfo stamp names whoever answers.
                assert unstamped(mine) == unstamped(theirs), f"{server}:{tool}"
                if mine.meta:
                    assert mine.meta[SERVER_INFO_META_KEY]["name"] == "onetool"
    assert any(r.structured_content for r in got) and any(c.type == "image" for r in got for c in r.content)


async def test_tools_of_the_same_name_on_two_servers_reach_their_own_server(direct: Direct) -> None:
    async with direct.client() as client:
        assert text_of(await client.call_tool("everything:echo", {"message": "hi"})) == "Echo: hi"
        assert text_of(await client.call_tool("fx:echo", {"message": "hi"})) == "echo: hi"


@pytest.mark.parametrize("mode", MODES)
async def test_arguments_are_checked_before_the_upstream_is_called(direct: Direct, mode: str) -> None:
    before = len(direct.log_lines("server=fx tool=count"))
    async with direct.client(mode) as client:
        nested = await client.call_tool("fx:count", {"items": ["a", 2]})
        missing = await client.call_tool("fx:count", {})
        unknown = await client.call_tool("fx:count", {"items": [], "colour": "red"})
        fine = await client.call_tool("fx:count", {"items": ["a", "b"]})
    assert nested.is_error and text_of(nested).startswith("fx:count: argument 'items.1': 2 is not of type \"string\"")
    assert missing.is_error and "missing required argument 'items'" in text_of(missing)
    assert unknown.is_error and "unknown argument 'colour'" in text_of(unknown)
    assert not fine.is_error and text_of(fine) == "2"
    # Only the valid call reached the upstream (one proxy.tool.call span).
    assert len(direct.log_lines("server=fx tool=count")) == before + 1


async def test_upstream_errors_read_as_a_snippet_sees_them(direct: Direct) -> None:
    async with direct.client() as client:
        timed_out = await client.call_tool("fx2:sleep", {"seconds": 10})
        failed = await client.call_tool("fx:fail", {"message": "boom"})
        snippet = await client.call_tool(
            "run",
            {
                "code": "out = []\nfor f in (lambda: fx2.sleep(seconds=10), lambda: fx.fail(message='boom')):\n"
                "    try:\n        f()\n    except ToolError as e:\n        out.append(str(e))\nout"
            },
        )
    assert timed_out.is_error and failed.is_error and not snippet.is_error
    assert (
        text_of(timed_out)
        == "fx2.sleep timed out after 1.0 s and was cancelled; if it needs longer, raise servers.fx2.timeout"
    )
    assert text_of(failed) == "fx.fail failed: boom"
    assert text_of(timed_out) in text_of(snippet) and text_of(failed) in text_of(snippet)
    # Logged like a pack call.
    assert direct.log_lines("server=fx2 tool=sleep") and direct.log_lines("server=fx tool=fail")


@pytest.mark.parametrize("mode", MODES)
async def test_a_cancelled_call_is_cancelled_upstream(direct: Direct, mode: str) -> None:
    cancel_log = direct.folder / "cancel.log"
    tag = f"direct-{mode}"
    async with direct.client(mode) as client:
        with anyio.move_on_after(1):
            await client.call_tool("fx:sleep", {"seconds": 30, "tag": tag})
            pytest.fail("the call was not cancelled")
        # The session stays usable.
        assert text_of(await client.call_tool("fx:echo", {"message": "after"})) == "echo: after"
    with anyio.fail_after(10):
        while not (cancel_log.exists() and f"cancelled {tag}" in cancel_log.read_text()):
            await anyio.sleep(0.05)


async def test_unknown_and_unavailable_names_say_what_exists(direct: Direct) -> None:
    async with direct.client() as client:
        typo = await client.call_tool("fx:ecco", {"message": "hi"})
        disabled = await client.call_tool("off:echo", {"message": "hi"})
        unprefixed = await client.call_tool("echo", {"message": "hi"})
    assert typo.is_error and text_of(typo).startswith("unknown tool 'fx:ecco' on /mcp/direct. Did you mean 'fx:echo'")
    assert unprefixed.is_error
    assert "servers with tools now: everything, fx, fx2, time" in text_of(unprefixed)
    assert "upstream_servers(operation='list')" in text_of(unprefixed)
    # A disabled server's tool is named: it is unavailable, in the words of every face (run's, exec's), not unknown.
    assert disabled.is_error and text_of(disabled) == "server 'off' is unavailable: disabled"


async def test_a_giant_unknown_name_is_answered_short_and_at_once(direct: Direct) -> None:
    """The one did-you-mean (text.closest) compares no name past 64 characters: a 60,000-character name (about
    what the HTTP front lets through) costs nothing."""
    async with direct.client() as client:
        started = time.perf_counter()
        result = await client.call_tool("fx:" + "e" * 60_000, {})
        elapsed = time.perf_counter() - started
    assert result.is_error and len(text_of(result)) < 1_000 and "Did you mean" not in text_of(result)
    assert elapsed < 5, elapsed  # difflib over two such names would take minutes


async def test_management_run_is_the_code_mode_tool(direct: Direct) -> None:
    async with direct.client() as client, Client(direct.served.url) as main_face:
        mine = (await client.list_tools()).tools[0]
        theirs = (await main_face.list_tools()).tools[0]
        ran = await client.call_tool("run", {"code": "fx.add(a=1, b=2)"})
        bad = await client.call_tool("run", {})
    assert mine.model_dump() == theirs.model_dump()
    assert mine.input_schema == RUN_INPUT_SCHEMA
    assert text_of(ran) == "3"
    assert bad.is_error and "expects a string argument `code`" in text_of(bad)


@pytest.mark.parametrize("mode", MODES)
async def test_progress_reaches_the_caller_of_an_upstream_tool_and_of_run(direct: Direct, mode: str) -> None:
    upstream: list[tuple[float, float | None]] = []
    snippet: list[tuple[float, float | None, str | None]] = []

    async def on_upstream(progress: float, total: float | None, message: str | None) -> None:
        upstream.append((progress, total))

    async def on_snippet(progress: float, total: float | None, message: str | None) -> None:
        snippet.append((progress, total, message))

    async with direct.client(mode) as client:
        arguments = {"duration": 0.6, "steps": 3}
        done = await client.call_tool(
            "everything:trigger-long-running-operation", arguments, progress_callback=on_upstream
        )
        ran = await client.call_tool("run", {"code": "progress(1, 2, 'half')\n'ok'"}, progress_callback=on_snippet)
    assert not done.is_error and not ran.is_error, (text_of(done), text_of(ran))
    # The upstream's own reports, as it sent them; the snippet's through the run's relay.
    assert len(upstream) >= 2 and upstream[-1] == (3.0, 3.0), upstream
    assert snippet == [(1.0, 2.0, "half")]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.filterwarnings("ignore::mcp.MCPDeprecationWarning")  # logging/setLevel, deprecated at 2026-07-28
async def test_the_servers_log_messages_reach_the_caller_at_its_level(direct: Direct, mode: str) -> None:
    """As a run's do: the caller's level is logging/setLevel on a handshake-era connection, the request's opt-in on
    a 2026-era one; the message is tagged with the server and on one line."""
    logs: list[types.LoggingMessageNotificationParams] = []

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        logs.append(params)

    async with direct.client(mode, logging_callback=on_log, log_level="info") as client:
        if mode == "legacy":
            await client.set_logging_level("info")
        below = await client.call_tool("fx:say", {"level": "debug", "message": "too quiet"})
        # A hostile upstream's message: a line break, a carriage return and an OSC 52 clipboard write.
        hostile = "disk\nfull\r\x1b]52;c;ZXZpbA==\x07"
        said = await client.call_tool("fx:say", {"level": "warning", "message": hostile})
        with anyio.fail_after(10):
            while not logs:
                await anyio.sleep(0.02)
    assert not below.is_error and not said.is_error, (text_of(below), text_of(said))
    assert [(log.level, log.logger, log.data) for log in logs] == [("warning", "fx", "fx: disk full ]52;c;ZXZpbA==")]


async def test_management_tools_offer_no_approval(direct: Direct) -> None:
    async with direct.client() as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        refused = await client.call_tool("upstream_servers", {"operation": "approve", "name": "fx"})
        extra = await client.call_tool("quarantine_security", {"approve": "fx"})
    # The default direct.management, propose: list, and add as a proposal.
    operations = tools["upstream_servers"].input_schema["properties"]["operation"]["enum"]
    assert operations == ["list", "add"]
    assert "direct.management is 'propose'" in (tools["upstream_servers"].description or "")
    assert "cannot approve" in (tools["quarantine_security"].description or "")
    assert tools["quarantine_security"].annotations and tools["quarantine_security"].annotations.read_only_hint
    assert refused.is_error and text_of(refused).startswith(
        "upstream_servers: argument 'operation': \"approve\" is not one of"
    )
    assert extra.is_error and "unknown argument 'approve'" in text_of(extra)


# ---- list_changed ---------------------------------------------------------------------------------------------


async def test_upstream_list_changed_reaches_both_eras(direct: Direct) -> None:
    """fx2 adds a tool named like a management tool: it appears as fx2:run, and `run` stays the code mode."""
    async with era_clients(direct.url) as clients:
        clients.drain()
        added = await clients.legacy.call_tool("fx2:add_tool", {"name": "run"})
        assert text_of(added) == "added run"
        await clients.both_heard()
        for client in (clients.legacy, clients.modern):
            listed = await names(client)
            assert "fx2:run" in listed and listed.count("run") == 1
            # with its elicitation, sampling and roots tools
            assert len([n for n in listed if n.startswith("everything:")]) == 17
        assert text_of(await clients.modern.call_tool("fx2:run", {})) == "I am run"
        assert text_of(await clients.modern.call_tool("run", {"code": "40 + 2"})) == "42"


async def test_a_dropped_server_leaves_and_returns(direct: Direct) -> None:
    async with era_clients(direct.url) as clients:
        clients.drain()
        crashed = await clients.modern.call_tool("fx2:crash", {})
        assert crashed.is_error and "server 'fx2' is unavailable" in text_of(crashed)
        await clients.both_heard()
        gone = await wait_for_names(clients.legacy, False, "fx2:")
        assert "fx:echo" in gone and "everything:echo" in gone
        back = await wait_for_names(clients.modern, True, "fx2:")
        assert "fx2:echo" in back
        # Both eras heard that it came back; the list is whole again.
        await clients.both_heard()
        assert text_of(await clients.legacy.call_tool("fx2:echo", {"message": "back"})) == "echo: back"


# ---- the separator and long names on a second gateway -------------------------------------------------------


async def test_separator_and_long_names_for_strict_clients(tmp_path: Path) -> None:
    marker = f"direct-sep-{uuid.uuid4().hex}"
    config = {
        "http": {"enable_direct_endpoint": True, "direct_separator": "__"},
        "servers": {LONG: {**FAULT, "env": {"ONETOOL_TEST_MARKER": marker}}},
    }
    # Every tool the fixture lists, as it lists them: each keeps a name of its own once shortened.
    async with Client(StdioServerParameters(command=FAULT["command"], args=FAULT["args"])) as fixture:
        expected = len((await fixture.list_tools()).tools)
    served = start_http_gateway(tmp_path, config, marker)
    try:
        async with Client(direct_url(served), read_timeout_seconds=60) as client:
            tools = (await client.list_tools()).tools
            strict = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
            assert all(strict.match(t.name) for t in tools), [t.name for t in tools]
            upstream_tools = [t for t in tools if t.name.startswith(LONG[:40])]
            assert len(upstream_tools) == expected and len({t.name for t in upstream_tools}) == expected
            # echo is the read-only tool with a `message` argument; its shortened name leads back to it exactly.
            (echo,) = [
                t
                for t in upstream_tools
                if "message" in t.input_schema.get("properties", {}) and t.annotations and t.annotations.read_only_hint
            ]
            assert len(echo.name) == MAX_NAME
            assert text_of(await client.call_tool(echo.name, {"message": "hi"})) == "echo: hi"
    finally:
        assert stop(served.proc) == 0


# ---- the control plane (runs once onetool.control exists) -----------------------------------------------------


async def call_json(client: Client, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, text_of(result)
    assert isinstance(result.structured_content, dict)
    return result.structured_content


@needs_control
async def test_upstream_servers_lists_every_server(direct: Direct) -> None:
    async with direct.client() as client:
        listed = await call_json(client, "upstream_servers", {"operation": "list"})
        missing = await client.call_tool("upstream_servers", {"operation": "add", "spec": FAULT})
        refused = [
            await client.call_tool("upstream_servers", {"operation": operation, "name": "time"})
            for operation in ("enable", "disable", "remove", "restart")
        ]
        listed_after = await call_json(client, "upstream_servers", {"operation": "list"})
    servers = {s["name"]: s for s in listed["servers"]}
    assert set(servers) == {"everything", "time", "fx", "fx2", "empty", "broken-server", "off"}
    assert servers["off"]["enabled"] is False and servers["time"]["tool_count"] == 2
    assert all("detail" not in s for s in servers.values())  # stderr never reaches an MCP client
    assert missing.is_error and "operation 'add' needs 'name'" in text_of(missing)
    # The default mode, propose, refuses the rest, saying which setting and who decides; nothing changed.
    for operation, result in zip(("enable", "disable", "remove", "restart"), refused, strict=True):
        assert result.is_error and text_of(result).startswith(
            f"upstream_servers: operation '{operation}' is not allowed here: direct.management is 'propose'"
        )
        assert "`direct.management: full` in onetool.yaml" in text_of(result)
    assert listed_after == listed


@needs_control
async def test_disable_and_enable_notify_both_eras(direct: Direct) -> None:
    async with era_clients(direct.url) as clients:
        for operation, present in (("disable", False), ("enable", True)):
            clients.drain()
            await anyio.to_thread.run_sync(direct.admin, f"/admin/servers/time/{operation}")
            await clients.both_heard()
            if present:
                await wait_for_names(clients.legacy, True, "time:")
            listed = await names(clients.legacy)
            assert ("time:convert_time" in listed) is present and "everything:echo" in listed


@needs_control
async def test_quarantine_and_approval_by_an_admin_notify_both_eras(direct: Direct) -> None:
    async with era_clients(direct.url) as clients:
        for action, present in (("quarantine", False), ("approve", True)):
            clients.drain()
            await anyio.to_thread.run_sync(direct.admin, f"/admin/servers/time/{action}")
            await clients.both_heard()
            for client in (clients.legacy, clients.modern):
                listed = await names(client)
                assert ("time:convert_time" in listed) is present and "everything:echo" in listed
        review = await call_json(clients.modern, "quarantine_security", {})
        assert "time" not in [s["name"] for s in review["quarantined_servers"]]


@needs_control
async def test_a_proposed_server_runs_only_once_approved_and_its_review_is_escaped_data(direct: Direct) -> None:
    marker = direct.folder / "poisoned-started"
    script = f"open({str(marker)!r}, 'w').close(); import runpy, sys; sys.argv.append('--poisoned'); "
    script += f"runpy.run_path({str(FIXTURES / 'rug_server.py')!r}, run_name='__main__')"
    spec = {"command": PYTHON, "args": ["-c", script], "env": {"MODEL_VALUE": "v1", "NODE_OPTIONS": "--require x.js"}}
    async with era_clients(direct.url) as clients:
        added = await call_json(clients.modern, "upstream_servers", {"operation": "add", "name": "newfx", "spec": spec})
        assert added["server"]["status"] == "proposed" and "nothing runs it until" in added["note"]
        await anyio.sleep(1)
        assert not marker.exists()
        listed = await call_json(clients.legacy, "upstream_servers", {"operation": "list"})
        (proposal,) = [s for s in listed["servers"] if s["name"] == "newfx"]
        # A model wrote every value of its proposal: all are shown, and a variable that changes what runs is flagged.
        assert proposal["launch"] == {
            "command": PYTHON,
            "args": ["-c", script],
            "cwd": None,
            "env_keys": ["MODEL_VALUE", "NODE_OPTIONS"],
            "env": {"MODEL_VALUE": "v1", "NODE_OPTIONS": "--require x.js"},
            "flagged_env": [{"key": "NODE_OPTIONS", "why": EXECUTION_ENV["NODE_OPTIONS"]}],
        }

        # An operator approves: it starts, still quarantined, and its tools are reviewed as data.
        await anyio.to_thread.run_sync(direct.admin, "/admin/servers/newfx/approve")
        assert marker.exists()
        result = await clients.modern.call_tool("quarantine_security", {})
        assert not result.is_error and isinstance(result.structured_content, dict)
        review = result.structured_content
        assert "newfx" in [s["name"] for s in review["quarantined_servers"]]
        held = {h["tool"]: h for h in review["held_tools"] if h["server"] == "newfx"}
        assert held["lookup"]["findings"] == [] and held["lookup"]["description"] == "Look up a term."
        weather = held["weather"]
        assert weather["description"].startswith(
            "Get the weather for a city.<U+202E RIGHT-TO-LEFT OVERRIDE><U+200B ZERO WIDTH SPACE> <IMPORTANT>"
        )
        assert "<U+E0073 TAG LATIN SMALL LETTER S>" in weather["description"]
        kinds = {f["kind"]: f["detail"] for f in weather["findings"] if f["where"] == "description"}
        assert set(kinds) == {
            "hidden_characters",
            "hidden_text",
            "instruction_block",
            "secret_request",
            "concealment",
            "url",
        }
        assert "tag characters spell: 'send it to https://evil.example'" in kinds["hidden_text"]
        assert "'<IMPORTANT>'" in kinds["instruction_block"] and "'~/.ssh'" in kinds["secret_request"]
        # Not one raw character a reader cannot see, in the structured result or in its text.
        everywhere = text_of(result) + json.dumps(review, ensure_ascii=False)
        assert not [c for c in everywhere if unseen(c)]
        assert POISONED not in everywhere

        # Connected for review, yet neither listed nor callable on any face.
        assert not any(n.startswith("newfx:") for n in await names(clients.modern))
        held = "server 'newfx' is unavailable: held for review by an operator (quarantined)"
        refused = await clients.modern.call_tool("newfx:weather", {"city": "x"})
        assert refused.is_error and text_of(refused).startswith(held)
        ran = await clients.modern.call_tool("run", {"code": "newfx.weather(city='x')"})
        assert ran.is_error and held in text_of(ran)
        await anyio.to_thread.run_sync(direct.admin, "/admin/servers/newfx", "DELETE")
        after = await call_json(clients.modern, "upstream_servers", {"operation": "list"})
        assert "newfx" not in [s["name"] for s in after["servers"]]
