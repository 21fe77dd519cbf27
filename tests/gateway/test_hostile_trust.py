"""The fourth adversarial round, through a real `onetool serve --http`: what a snippet, a model, an upstream or a web
page could make the host or its operator do (issue 42's classes 1-10). Each test is a payload of its own against
the class, not the round's example; tests/gateway/test_hostile_gateway.py has the earlier rounds.

The shared gateway (:func:`served`) proxies a server whose every word is hostile (tests/fixtures/
hostile_names_server.py), the elicitation fixture, the fault fixture, and a disabled server; /mcp/direct is on and
a model may propose servers, at most three at a time, of at most 4 KB each.
"""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp import Client, types
from mcp.client.session import ClientRequestContext
from prometheus_client.parser import text_string_to_metric_families

from onetool.serve.http import SECURITY_HEADERS
from onetool.text import unseen
from onetool.upstream.asks import SAMPLED_BY
from onetool.upstream.elicit import ASKED_BY, QUOTE
from tests.admin_api import admin
from tests.conftest import FIXTURES, PYTHON
from tests.fixtures.elicit_server import FORGED
from tests.fixtures.hostile_names_server import INSTRUCTIONS, NAMES
from tests.gateway.test_hostile_gateway import attack
from tests.gateways import ONETOOL, ServedGateway, origin, start_http_gateway, stop, text_of

pytestmark = pytest.mark.anyio

ADMIN = "hostile-trust-admin-token"
REBINDING = "rebind.attacker.example"
MAX_PROPOSALS = 3
MAX_PROPOSAL_BYTES = 4096
UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff]")
"""What a terminal would act on (or a reader not see), newline and tab aside."""


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServedGateway]:
    marker = f"trust-{uuid.uuid4().hex}"
    env = {"ONETOOL_TEST_MARKER": marker}
    fault = {"command": PYTHON, "args": [str(FIXTURES / "fault_server.py"), "ok"], "env": env}
    config = {
        "servers": {
            "fx": fault,
            "crashy": {**fault, "enabled": False},
            "hostile": {"command": PYTHON, "args": [str(FIXTURES / "hostile_names_server.py")], "env": env},
            "elicit": {"command": PYTHON, "args": [str(FIXTURES / "elicit_server.py")], "env": env, "timeout": 10},
        },
        "http": {"enable_direct_endpoint": True},
        "direct": {"max_proposals": MAX_PROPOSALS, "max_proposal_bytes": MAX_PROPOSAL_BYTES},
        "sandbox": {"timeout": 20},
    }
    gateway = start_http_gateway(tmp_path_factory.mktemp("trust"), config, marker, env={"ONETOOL_ADMIN_TOKEN": ADMIN})
    try:
        yield gateway
    finally:
        assert stop(gateway.proc) == 0


def base(served: ServedGateway) -> str:
    return origin(served.url)


def port(served: ServedGateway) -> int:
    return int(base(served).rsplit(":", 1)[1])


def get(served: ServedGateway, path: str, **headers: str) -> tuple[int, dict[str, str], bytes]:
    """GET ``path``: status, headers (lower-case names), body; redirects are not followed."""
    response = httpx2.get(base(served) + path, headers=headers, timeout=60, follow_redirects=False)
    return response.status_code, {k.lower(): v for k, v in response.headers.items()}, response.content


def scrape(served: ServedGateway) -> str:
    status, _, body = get(served, "/metrics")
    assert status == 200
    return body.decode()


def onetool(*args: str) -> subprocess.CompletedProcess[str]:
    """The CLI against the served gateway, as an operator's terminal would run it."""
    env = {k: v for k, v in os.environ.items() if k != "ONETOOL_CONFIG"}
    return subprocess.run([ONETOOL, *args], capture_output=True, text=True, timeout=120, env=env)


def attached(served: ServedGateway, *args: str) -> subprocess.CompletedProcess[str]:
    return onetool(*args, "--url", base(served), "--token", ADMIN)


@contextmanager
def signed_in(served: ServedGateway) -> Iterator[httpx2.Client]:
    """A browser session of the console, signed in with the admin token."""
    with httpx2.Client(base_url=base(served), timeout=60, follow_redirects=False) as client:
        assert client.post("/ui/login", data={"token": ADMIN}).status_code == 303
        yield client


# ---- 1. /metrics: names a snippet makes up are no label values; label values are capped ----------------------


async def test_made_up_tool_names_on_a_server_that_is_down_do_not_grow_metrics(served: ServedGateway) -> None:
    """The issue's payload, and more: proxy.call on a disabled server, and on a connected one, with made-up names of
    20,000 characters (and a terminal escape). Each call is counted under the fixed tool label; no name reaches a
    scrape, which stays as small as before the attack."""
    before = len(scrape(served))
    code = (
        "n = 0\n"
        "for i in range(90):\n"
        "    for server in ('crashy', 'fx'):\n"
        "        try:\n"
        "            proxy.call(server, 'made-up-%d-\\x1b]52;c;eA==\\x07' % i + 'x' * 20_000)\n"
        "        except Exception:\n"
        "            n += 1\n"
        "n"
    )
    result, bystander = await attack(served.url, code)
    assert text_of(result) == "180", text_of(result)[:500]
    assert bystander.spared(), bystander
    text = scrape(served)
    assert "made-up" not in text and "xxxxxxxx" not in text and "\x1b" not in text
    assert len(text) < before + 10_000, "the scrape grew with the names a snippet made up"
    samples = {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }
    counted = {("server", "crashy"), ("tool", "_unknown")}
    unknown = sum(
        value
        for (name, labels), value in samples.items()
        if name == "onetool_upstream_call_errors_total" and counted <= labels
    )
    assert unknown >= 90
    assert all(len(v) <= 128 for _, labels in samples for _, v in labels)


async def test_an_upstreams_own_names_become_labels_within_the_charset(served: ServedGateway) -> None:
    """A real tool of the catalogue is a label value, as MCP's charset allows it: a terminal escape in an upstream's
    tool name does not reach a scrape raw."""
    calls = "[proxy.call('hostile', name) for name in %r]" % [NAMES["esc"], NAMES["plain"]]
    result = await served.run(calls)
    assert json.loads(text_of(result)) == ["called esc", "called plain"]
    text = scrape(served)
    assert 'server="hostile",tool="plain_tool"' in text
    escaped = re.findall(r'server="hostile",tool="(esc[^"]*)"', text)
    assert escaped and all(re.fullmatch(r"[A-Za-z0-9_.-]{1,128}", name) for name in escaped), escaped
    assert not UNSAFE.search(text)


# ---- 2. every route obeys the same Host and Origin rules ------------------------------------------------------

ROUTES = [
    "/status",
    "/metrics",
    "/health",
    "/ready",
    "/runtime/tools.py",
    "/ui/login",
    "/ui/servers",
    "/ui/static/ui.js",
    "/admin/servers",
    "/oauth/callback",
    "/mcp",
    "/mcp/direct",
]


@pytest.mark.parametrize("path", ROUTES)
def test_a_dns_rebinding_page_reads_no_route(served: ServedGateway, path: str) -> None:
    """A page served under the attacker's name, rebound to 127.0.0.1, sends its own name as Host: every route
    refuses it, /status and /metrics (which show server names, errors, held tools, proposals) included."""
    status, headers, body = get(served, path, Host=f"{REBINDING}:{port(served)}")
    assert status == 421, (status, body[:300])
    assert b"hostile" not in body and b"crashy" not in body
    assert headers["x-frame-options"] == "DENY"  # a refusal is a response like any other


@pytest.mark.parametrize("path", ["/status", "/metrics", "/health", "/runtime/tools.py", "/admin/servers"])
def test_a_page_on_another_port_of_this_machine_reads_no_route(served: ServedGateway, path: str) -> None:
    """Same-site, another origin: its fetch carries its Origin, which every route refuses."""
    status, _, body = get(served, path, Origin=f"http://127.0.0.1:{port(served) + 1}")
    assert status == 403 and b"hostile" not in body


def test_probes_and_scrapers_that_name_an_address_pass(served: ServedGateway) -> None:
    """What a Kubernetes probe (the pod's address) or a container's healthcheck sends is no DNS name: it passes."""
    for host in (f"10.1.2.3:{port(served)}", "localhost", f"[::1]:{port(served)}"):
        assert get(served, "/health", Host=host)[0] == 200
        assert get(served, "/metrics", Host=host)[0] == 200


# ---- 3. a model's proposal is shown whole, what changes what runs flagged; 7. proposals are bounded ------------

EXECUTES = "These environment variables change what runs"
PROPOSED_ENV = {
    "LD_PRELOAD": "/tmp/evil.so",
    "PATH": "/tmp/evil\x1b]52;c;eA==\x07:/usr/bin",
    "npm_config_registry": "https://registry.evil.example",
    "NOTE": "<script>alert(1)</script>\u202e",
}


async def propose(served: ServedGateway, name: str, spec: dict[str, Any]) -> types.CallToolResult:
    async with Client(base(served) + "/mcp/direct", read_timeout_seconds=60) as client:
        return await client.call_tool("upstream_servers", {"operation": "add", "name": name, "spec": spec})


async def test_a_proposal_shows_every_value_it_would_run_with_and_flags_what_changes_what_runs(
    served: ServedGateway,
) -> None:
    added = await propose(served, "helper", {"command": "npx", "args": ["-y", "helper"], "env": PROPOSED_ENV})
    headers = {"X-Trace": "t\u202e1", "Authorization": "Bearer model-written"}
    added_http = await propose(served, "remote", {"url": "https://mcp.evil.example/mcp", "headers": headers})
    try:
        assert not added.is_error and not added_http.is_error, (text_of(added), text_of(added_http))
        # The admin API: every value, its invisible characters named; the flagged keys with why.
        status, view = admin(served.url, "GET", "/admin/servers/helper", token=ADMIN)
        assert status == 200
        launch = view["launch"]
        assert launch["env"]["LD_PRELOAD"] == "/tmp/evil.so"
        assert launch["env"]["PATH"] == "/tmp/evil<U+001B CONTROL>]52;c;eA==<U+0007 CONTROL>:/usr/bin"
        assert launch["env"]["NOTE"] == "<script>alert(1)</script><U+202E RIGHT-TO-LEFT OVERRIDE>"
        assert {f["key"] for f in launch["flagged_env"]} == {"LD_PRELOAD", "PATH", "npm_config_registry"}
        _, remote = admin(served.url, "GET", "/admin/servers/remote", token=ADMIN)
        assert remote["launch"]["headers"] == {
            "Authorization": "Bearer model-written",
            "X-Trace": "t<U+202E RIGHT-TO-LEFT OVERRIDE>1",
        }
        # The console's review page: the same, escaped as HTML.
        with signed_in(served) as browser:
            page = browser.get("/ui/review").text
        assert "/tmp/evil.so" in page and "LD_PRELOAD" in page and EXECUTES in page
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page and "<script>alert" not in page
        assert "Bearer model-written" in page
        assert not UNSAFE.search(page)
        # The CLI, one proposal and the list of servers.
        shown = attached(served, "servers", "show", "helper")
        assert shown.returncode == 0, shown.stderr
        assert "env LD_PRELOAD=/tmp/evil.so  <- CHANGES WHAT RUNS" in shown.stdout
        assert "env NOTE=<script>alert(1)</script><U+202E RIGHT-TO-LEFT OVERRIDE>" in shown.stdout
        listed = attached(served, "servers")
        assert "header X-Trace: t<U+202E RIGHT-TO-LEFT OVERRIDE>1" in listed.stdout
        assert not UNSAFE.search(shown.stdout + listed.stdout)
        # An operator cannot slip a value of theirs into a proposal, whose values everyone sees.
        status, refused = admin(
            served.url, "PATCH", "/admin/servers/helper", {"env": {"TOKEN": "operator-secret"}}, token=ADMIN
        )
        assert status == 409 and "approve it first" in refused["error"]
        assert admin(served.url, "PATCH", "/admin/servers/helper", {"env": {"NOTE": None}}, token=ADMIN)[0] == 200
    finally:
        for name in ("helper", "remote"):
            admin(served.url, "DELETE", f"/admin/servers/{name}", token=ADMIN)


async def test_proposals_are_capped_per_actor_and_in_size(served: ServedGateway) -> None:
    """A model proposing in a loop gets MAX_PROPOSALS through, then a refusal naming direct.max_proposals; one
    proposal of 400 KB is refused naming direct.max_proposal_bytes. Neither is stored, listed or counted."""
    names = [f"flood{i}" for i in range(MAX_PROPOSALS + 2)]
    try:
        big = await propose(served, "huge", {"command": "npx", "args": ["x" * 400_000]})
        assert big.is_error and "direct.max_proposal_bytes" in text_of(big) and len(text_of(big)) < 1_000
        answers = [await propose(served, name, {"command": "npx", "args": [name]}) for name in names]
        assert [a.is_error for a in answers] == [False] * MAX_PROPOSALS + [True, True]
        assert "direct.max_proposals" in text_of(answers[-1])
        _, listed = admin(served.url, "GET", "/admin/servers", token=ADMIN)
        proposed = {s["name"] for s in listed["servers"] if s["status"] == "proposed"}
        assert proposed == set(names[:MAX_PROPOSALS])
        assert 'server="huge"' not in scrape(served) and f'server="{names[-1]}"' not in scrape(served)
        # A decision frees a place.
        assert admin(served.url, "DELETE", f"/admin/servers/{names[0]}", token=ADMIN)[0] == 200
        assert not (await propose(served, "again", {"command": "npx", "args": ["again"]})).is_error
    finally:
        for name in [*names, "again"]:
            admin(served.url, "DELETE", f"/admin/servers/{name}", token=ADMIN)


# ---- 4. no CLI output writes an upstream's words raw to a terminal --------------------------------------------


def test_no_cli_output_writes_upstream_text_raw(served: ServedGateway) -> None:
    """Every command an operator reads a hostile upstream through: its names, descriptions and instructions carry
    ESC, BEL, OSC 52 and a bidi override. Not one reaches stdout or stderr raw, and no line of the report is the
    upstream's own (its instructions are quoted, its names one line each)."""
    outputs = {
        "servers": attached(served, "servers"),
        "show": attached(served, "servers", "show", "hostile"),
        "show --json": attached(served, "servers", "show", "hostile", "--json"),
        "tools": attached(served, "servers", "tools", "hostile"),
        "status": onetool("status"),
        "logs": onetool("logs", "--log-file", str(served.log), "--server", "hostile"),
    }
    for command, done in outputs.items():
        assert done.returncode == 0, (command, done.stderr)
        assert not UNSAFE.search(done.stdout + done.stderr), (command, done.stdout[:2000])
    show = outputs["show"].stdout
    assert "\nquarantined: no" not in show  # the instructions' forged line is quoted, not a line of the report
    assert "  | \\x1b[2Jquarantined: no\\x1b]52;c;ZXZpbA==\\x07" in show
    assert "esc\\x1b]0;pwned\\x07" in show and 'quote"\\nnewline' in show
    assert json.loads(outputs["show --json"].stdout)["instructions"] == INSTRUCTIONS


# ---- 5. an upstream's question names the server that asks, unforgeably ----------------------------------------


async def test_an_upstreams_question_is_attributed_and_cannot_forge_an_attribution(served: ServedGateway) -> None:
    asked: list[types.ElicitRequestParams] = []

    async def user(context: ClientRequestContext, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params)
        return types.ElicitResult(action="decline")

    async with Client(served.url, mode="legacy", read_timeout_seconds=60, elicitation_callback=user) as client:
        result = await client.call_tool("run", {"code": "elicit.forged()"})
    assert not result.is_error, text_of(result)
    [question] = asked
    first, *rest = question.message.split("\n")
    assert first == ASKED_BY.format("elicit")  # the gateway's line, with the configured name
    assert all(line.startswith(QUOTE) for line in rest)  # the server's own words, every line quoted
    assert f"\n{ASKED_BY.format('github')}" not in question.message  # its forged attribution is quoted too
    assert "<U+000D CONTROL>" in question.message and "<U+202E RIGHT-TO-LEFT OVERRIDE>" in question.message
    assert not UNSAFE.search(question.message)


async def test_an_upstreams_sampling_request_is_attributed_and_cannot_forge_an_attribution(
    served: ServedGateway,
) -> None:
    """The client's user approves a sampling request knowing which server asks: the gateway's line comes first in
    the system prompt, the server's own system prompt quoted below it (a 2026-era client: input-required)."""
    asked: list[types.CreateMessageRequestParams] = []

    async def model(
        context: ClientRequestContext, params: types.CreateMessageRequestParams
    ) -> types.CreateMessageResult:
        asked.append(params)
        return types.CreateMessageResult(role="assistant", content=types.TextContent(type="text", text="no"), model="m")

    async with Client(served.url, read_timeout_seconds=60, sampling_callback=model) as client:
        result = await client.call_tool("run", {"code": f"elicit.haiku(max_tokens=10, system={FORGED!r})"})
    assert not result.is_error, text_of(result)
    [request] = asked
    first, *rest = (request.system_prompt or "").split("\n")
    assert first == SAMPLED_BY.format("elicit")
    assert rest and all(line.startswith(QUOTE) for line in rest)
    assert f"\n{ASKED_BY.format('github')}" not in (request.system_prompt or "")
    assert "<U+202E RIGHT-TO-LEFT OVERRIDE>" in (request.system_prompt or "")
    assert not UNSAFE.search(request.system_prompt or "")


# ---- 6. no page may frame the console; every response says what it is -----------------------------------------


def test_every_console_response_forbids_framing(served: ServedGateway) -> None:
    with signed_in(served) as browser:
        responses = {
            "page": browser.get("/ui/servers"),
            "redirect": browser.get("/ui/"),
            "error": browser.post("/ui/servers/hostile/approve", data={"csrf": "stale"}),
            "missing": browser.get("/ui/nowhere"),
            "static": browser.get("/ui/static/ui.js"),
            "live": browser.get("/ui/login"),
        }
    responses["signed out"] = httpx2.get(base(served) + "/ui/servers", timeout=30)
    responses["refused"] = httpx2.get(base(served) + "/ui/login", headers={"Host": REBINDING}, timeout=30)
    assert {k: r.status_code for k, r in responses.items()} == {
        "page": 200,
        "redirect": 303,
        "error": 403,
        "missing": 404,
        "static": 200,
        "live": 303,
        "signed out": 303,
        "refused": 421,
    }
    for what, response in responses.items():
        for name, value in SECURITY_HEADERS:
            assert response.headers.get(name.decode()) == value.decode(), (what, name)
        assert "frame-ancestors 'none'" in response.headers["content-security-policy"]


# ---- 8. /mcp/direct lists no name outside MCP's charset, and each renamed one still reaches its tool -------------


async def test_direct_lists_only_names_within_the_charset_and_the_renamed_reach_their_tools(
    served: ServedGateway,
) -> None:
    async with Client(base(served) + "/mcp/direct", read_timeout_seconds=60) as client:
        listed = [t.name for t in (await client.list_tools()).tools]
        hostile = [name for name in listed if name.startswith("hostile:")]
        assert len(hostile) == len(NAMES)
        for name in listed:
            assert re.fullmatch(r"[A-Za-z0-9_.-]{1,64}(:[A-Za-z0-9_.-]{1,64})?", name), name
        answers = {text_of(await client.call_tool(name, {})) for name in hostile}
    assert answers == {f"called {key}" for key in NAMES}
    log = served.log.read_text()
    assert "server 'hostile': 6 names are outside MCP's tool-name charset" in log


# ---- 9. the console marks every invisible character of what upstreams and models wrote ------------------------


async def test_the_console_marks_invisible_characters_everywhere(served: ServedGateway) -> None:
    """The servers page, a server's page (its tools table, instructions, last call error), the review page with the
    server quarantined (every tool held), and the audit log: no raw control, bidi or zero-width character."""
    await served.run(f"proxy.call('hostile', {NAMES['rlo']!r})")
    assert admin(served.url, "POST", "/admin/servers/hostile/quarantine", token=ADMIN)[0] == 200
    try:
        with signed_in(served) as browser:
            pages = {path: browser.get(path).text for path in ("/ui/servers", "/ui/servers/hostile", "/ui/review")}
            pages["/ui/audit"] = browser.get("/ui/audit").text
        for path, page in pages.items():
            shown = HIDDEN_TOOL.sub("", page)  # a form's hidden field sends the exact name back; nobody reads it
            assert not UNSAFE.search(shown), (path, UNSAFE.findall(shown)[:5])
            assert not [c for c in shown if unseen(c, keep="\t\n")], path
        tools = pages["/ui/servers/hostile"]
        assert "esc&lt;U+001B CONTROL&gt;]0;pwned&lt;U+0007 CONTROL&gt;" in tools
        assert "report&lt;U+202E RIGHT-TO-LEFT OVERRIDE&gt;txt.exe" in tools
        review = pages["/ui/review"]
        assert "clip&lt;U+001B CONTROL&gt;]52;c;ZXZpbA==&lt;U+0007 CONTROL&gt;" in review
    finally:
        with anyio.fail_after(30):
            while admin(served.url, "POST", "/admin/servers/hostile/approve", token=ADMIN)[0] != 200:
                await anyio.sleep(0.2)


HIDDEN_TOOL = re.compile(r'<input type="hidden" name="tool" value="[^"]*">')


# ---- 10. what holds upstream text or tokens is its owner's alone, whatever the umask ----------------------------


def test_log_files_state_and_discovery_are_private_under_umask_022(tmp_path: Path) -> None:
    marker = f"modes-{uuid.uuid4().hex}"
    env = {"ONETOOL_TEST_MARKER": marker}
    config = {
        "servers": {"fx": {"command": PYTHON, "args": [str(FIXTURES / "fault_server.py"), "ok"], "env": env}},
        "log": {"rotation": 2_000, "retention": 3},
    }
    folders = {"ONETOOL_STATE_DIR": str(tmp_path / "fresh" / "state"), "ONETOOL_RUNTIME_DIR": str(tmp_path / "run")}
    served = start_http_gateway(tmp_path, config, marker, env=folders, preexec_fn=lambda: os.umask(0o022))
    try:
        for _ in range(20):  # each request is a DEBUG record: enough to rotate the file a few times
            with pytest.raises(urllib.error.HTTPError):
                urllib.request.urlopen(base(served) + "/nowhere", timeout=30)
        logs = [served.log, *served.log.parent.glob("gateway.*.log")]
        assert len(logs) > 1, "no rotation happened"
        private = [*logs, *Path(folders["ONETOOL_STATE_DIR"]).rglob("*.db")]
        private += list((Path(folders["ONETOOL_RUNTIME_DIR"]) / "gateways").glob("*.json"))
        assert len(private) >= len(logs) + 2
        for path in private:
            assert stat.S_IMODE(path.stat().st_mode) == 0o600, path
        for folder in (Path(folders["ONETOOL_STATE_DIR"]), Path(folders["ONETOOL_RUNTIME_DIR"])):
            assert stat.S_IMODE(folder.stat().st_mode) == 0o700, folder
    finally:
        assert stop(served.proc) == 0


# ---- prompts and resources (issue 44): an upstream's every word reaches a client escaped -------------------------


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_a_hostile_servers_prompts_and_resources_reach_every_face_escaped(
    served: ServedGateway, mode: str
) -> None:
    """Every field of the hostile server's prompt, resource and template, and what getting and reading them returns,
    on /mcp and /mcp/direct in both eras: nothing a terminal would act on, nothing a reader would not see."""
    for path in ("", "/direct"):
        async with Client(served.url + path, mode=mode, read_timeout_seconds=60) as client:  # type: ignore[arg-type]
            prompts = [p for p in (await client.list_prompts()).prompts if p.name.startswith("hostile:")]
            resources = [r for r in (await client.list_resources()).resources if r.name.startswith("hostile:")]
            templates = (await client.list_resource_templates()).resource_templates
            got = [await client.get_prompt(p.name, {"topic": "t\x1b[2J"}) for p in prompts]
            read = [await client.read_resource(r.uri) for r in resources]
            read.append(await client.read_resource("hostile://notes/k"))
            assert len(prompts) == 1 and len(resources) == 1 and len(templates) == 1
            for shown in (*prompts, *resources, *templates, *got, *read):
                dumped = json.dumps(shown.model_dump(mode="json", by_alias=True), ensure_ascii=False)
                assert not UNSAFE.search(dumped), dumped
            assert "Use me." in json.dumps([g.model_dump(mode="json") for g in got])
