"""The host's side of the channel against a hostile worker: every string that crosses is valid for JSON and
MCP, every number is finite, nesting and sizes are bounded; and the same through restricted snippets."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest

from sandbox import Limits, RunError, RunResult, Sandbox
from sandbox.host._untrusted import MAX_NESTING, decode_untrusted
from sandbox.protocol.sites import MAX_SITE_NAMES, MAX_SITES
from tests.sandbox.conftest import PACKS, make_on_call
from tests.sandbox.hostile_worker import assert_json_safe, run_hostile

pytestmark = pytest.mark.anyio

LONE = b'"a\\ud800b"'
"""A JSON string holding a lone high surrogate, as a worker's frame carries it."""


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (f"done({LONE!r})", {"value": "a\ufffdb"}),
        (
            'done(b\'{"a": {"k\\\\udc00": ["x\\\\ud800", "\\\\udbff\\\\udfff"]}}\')',
            {"value": {"a": {"k\ufffd": ["x\ufffd", "\U0010ffff"]}}},
        ),
        (f"done(b'1', output={LONE!r})", {"value": 1, "output": "a\ufffdb"}),
        ("done(b'\"\\\\\\\\ud800\"')", {"value": "\\ud800"}),
        ("done(b'\"\\xed\\xa0\\x80 \\xff\"')", {"value": "\ufffd\ufffd\ufffd \ufffd"}),
        (
            "done(b'[NaN, Infinity, -Infinity, 1e999, -1e999, 0.5]')",
            {"value": ["NaN", "Infinity", "-Infinity", "Infinity", "-Infinity", 0.5]},
        ),
    ],
    ids=["value", "nested-key-and-pair", "output", "escaped-backslash-is-text", "raw-bytes", "non-finite-numbers"],
)
async def test_worker_frames_become_json_safe(hostile: Sandbox, body: str, expected: dict[str, Any]) -> None:
    result = await run_hostile(hostile, body)
    assert result.ok, result.error
    assert_json_safe(result)
    assert {"value": result.value, "output": result.output} == {"output": "", **expected}


async def test_error_text_is_json_safe_and_capped(hostile: Sandbox) -> None:
    error = (
        b'{"type":"Bad\\ud800'
        + b"T" * 500
        + b'","message":"m\\udfff'
        + b"m" * 5000
        + b'","line":3,"column":null,"source":"s\\ud800'
        + b"s" * 5000
        + b'"}'
    )
    result = await run_hostile(hostile, f"done(b'null', error={error!r})", limits=Limits(max_output=1000))
    assert_json_safe(result)
    assert result.error is not None and result.error.line == 3
    assert result.error.type.startswith("Bad\ufffdT") and len(result.error.type) == 128
    assert result.error.message.startswith("m\ufffdm") and len(result.error.message) == 1200
    assert (
        result.error.source is not None
        and result.error.source.startswith("s\ufffds")
        and len(result.error.source) == 1000
    )


async def test_call_arguments_reach_on_call_json_safe(hostile: Sandbox) -> None:
    seen: list[Any] = []

    async def on_call(pack: str, tool: str, args: list[Any], kwargs: dict[str, Any]) -> Any:
        seen.append([pack, tool, args, kwargs])
        return "ok"

    body = (
        'call(b\'"demo"\', b\'"echo"\', args=b\'["\\\\ud800", {"k\\\\udc00": NaN}]\', kwargs=b\'{"q\\\\ud800": 1}\')\n'
        "reply = channel.receive()\n"
        "done(json.dumps(reply).encode())\n"
    )
    result = await run_hostile(hostile, "import json\n" + body, on_call=on_call)
    assert result.value == {"value": "ok"}, result.error
    assert seen == [["demo", "echo", ["\ufffd", {"k\ufffd": "NaN"}], {"q\ufffd": 1}]]
    json.dumps(seen, allow_nan=False).encode("utf-8")


@pytest.mark.parametrize(
    ("pack", "tool", "shown"),
    [
        ("b'\"demo\"'", "b'\"ech\\\\ud800o\"'", "'ech\ufffdo' is not a tool name"),
        ("b'\"de\\\\udc00mo\"'", "b'\"echo\"'", "'de\ufffdmo' is not a pack name"),
        ("b'\"demo\"'", "b'\"a-b\"'", "'a-b' is not a tool name"),
        ("b'\"demo\"'", "b'\"' + b't' * 129 + b'\"'", "(129 characters)' is not a tool name"),
        ("b'\"demo\"'", "b'\"' + b'x' * 7_000_000 + b'\"'", "(7000000 characters)' is not a tool name"),
    ],
    ids=["surrogate-tool", "surrogate-pack", "not-identifier", "too-long", "7-MB-name"],
)
async def test_bad_names_are_refused_without_calling(hostile: Sandbox, pack: str, tool: str, shown: str) -> None:
    """`pack` and `tool` are Python expressions of the JSON text the hostile worker sends."""
    called: list[str] = []

    async def on_call(pack: str, tool: str, args: list[Any], kwargs: dict[str, Any]) -> Any:
        called.append(tool)
        return None

    body = f"call({pack}, {tool})\nreply = channel.receive()\ndone(json.dumps(reply).encode())\n"
    result = await run_hostile(hostile, "import json\n" + body, on_call=on_call)
    assert called == [] and result.ok, result.error
    assert result.value["type"] == "UnknownTool" and shown in result.value["error"]
    assert len(result.value["error"]) < 200
    assert_json_safe(result)


@pytest.mark.parametrize(
    ("body", "says"),
    [
        ("send(b'[' * 100_000 + b']' * 100_000)", "malformed message"),
        (f"done(b'[' * {MAX_NESTING} + b']' * {MAX_NESTING})", "recursion limit exceeded"),
        ('send(b\'{"op": "done", "value": 1}\')', "not a done message"),
        ('send(b\'{"op": "call", "pack": 1}\')', "not a call message"),
        ("send(b'[1, 2]')", "unexpected message"),
        ("os.write(channel.write_fd, struct.pack('>I', 100_000_000))", "exceeds the"),
    ],
    ids=["deep-nesting", "nesting-past-cap", "done-without-fields", "call-without-fields", "not-a-message", "oversize"],
)
async def test_broken_frames_end_the_run_as_worker_crashed(hostile: Sandbox, body: str, says: str) -> None:
    result = await run_hostile(hostile, body)
    assert result.error is not None and result.error.type == "WorkerCrashed", result.error
    assert "broke the protocol" in result.error.message and says in result.error.message
    assert (await hostile.run("1 + 1", packs={}, on_call=make_on_call())).value == 2


async def test_deepest_value_a_worker_may_send_still_arrives(sandbox: Sandbox) -> None:
    # The worker's own conversion allows MAX_DEPTH + 1 levels of lists; in a call's kwargs that is MAX_NESTING.
    code = "v = []\nfor _ in range(100):\n    v = [v]\nr = demo.echo(k=v)\nlen(str(r))"
    result = await sandbox.run(code, packs=PACKS, on_call=make_on_call())
    assert result.ok, result.error


SURROGATE_SNIPPETS = [
    ("value", "'a' + chr(0xd800)", lambda r: r.value == "a\ufffd"),
    ("key", "{chr(0xdc00): [chr(0xd83d) + chr(0xde00)]}", lambda r: r.value == {"\ufffd": ["\U0001f600"]}),
    ("print", "print(chr(0xd800))\n1", lambda r: r.output == "\ufffd\n"),
    ("error", "raise ValueError(chr(0xd800) * 3)", lambda r: r.error.message == "\ufffd" * 3),
    (
        "argument",
        "demo.echo(chr(0xd800), k=chr(0xdfff))",
        lambda r: r.value == {"args": ["\ufffd"], "kwargs": {"k": "\ufffd"}},
    ),
]


@pytest.mark.parametrize(("where", "code", "check"), SURROGATE_SNIPPETS, ids=[s[0] for s in SURROGATE_SNIPPETS])
async def test_restricted_snippet_surrogates_come_back_replaced(
    sandbox: Sandbox, where: str, code: str, check: Any
) -> None:
    result: RunResult = await sandbox.run(code, packs=PACKS, on_call=make_on_call())
    assert_json_safe(result)
    assert check(result), result


def test_decoder_matches_a_reference_on_random_escapes() -> None:
    """Random mixes of backslashes, surrogate escapes and pairs: the regex pass agrees with a plain
    left-to-right reading of the escapes, so an escaped backslash never hides or fakes a surrogate."""
    rng = random.Random(7)
    alphabet = ["\\\\", "\\ud800", "\\udc00", "\\uDBFF", "\\uDFFF", "\\u00e9", "\\n", "a", "d8", "00"]
    for _ in range(5000):
        parts = [rng.choice(alphabet) for _ in range(rng.randint(0, 12))]
        value = decode_untrusted(('"' + "".join(parts) + '"').encode())
        assert value == json.loads('"' + "".join(_reference(parts)) + '"')
        value.encode("utf-8")


def _reference(parts: list[str]) -> list[str]:
    """Each part is one escape or plain text; pair a high surrogate with a following low one, else U+FFFD."""
    out: list[str] = []
    i = 0
    while i < len(parts):
        part = parts[i]
        if part.lower() in ("\\ud800", "\\udbff"):
            if i + 1 < len(parts) and parts[i + 1].lower() in ("\\udc00", "\\udfff"):
                out += [part, parts[i + 1]]
                i += 2
                continue
            part = "\\ufffd"
        elif part.lower() in ("\\udc00", "\\udfff"):
            part = "\\ufffd"
        out.append(part)
        i += 1
    return out


SITE = b'["demo", "echo", 0, [], 1, 1]'


@pytest.mark.parametrize(
    ("body", "says"),
    [
        (f'send(b\'{{"op": "sites", "sites": [{SITE.decode()}]}}\')\n' * 2, "call sites come once"),
        (
            "call(b'\"demo\"', b'\"echo\"')\nchannel.receive()\n"
            f'send(b\'{{"op": "sites", "sites": [{SITE.decode()}]}}\')',
            "call sites come once",
        ),
        ('send(b\'{"op": "sites", "sites": [["demo", "echo", -1, null, 1, 1]]}\')', "not a sites message"),
        (
            f"send(b'{{\"op\": \"sites\", \"sites\": [' + b','.join([{SITE!r}] * {MAX_SITES + 1}) + b']}}')",
            "not a sites message",
        ),
        (
            'send(b\'{"op": "sites", "sites": [["demo", "echo", 0, [\''
            f" + b','.join([b'\"k\"'] * {MAX_SITE_NAMES + 1}) + b'], 1, 1]]}}')",
            "not a sites message",
        ),
    ],
    ids=["twice", "after-a-call", "negative-count", "too-many-sites", "too-many-names"],
)
async def test_call_sites_come_once_first_and_bounded(hostile: Sandbox, body: str, says: str) -> None:
    checked: list[list[Any]] = []
    result = await run_hostile(hostile, body, on_sites=lambda sites: checked.append(sites))
    assert result.error is not None and result.error.type == "WorkerCrashed", result.error
    assert says in result.error.message
    assert len(checked) <= 1


async def test_a_wrong_call_site_ends_the_run_before_any_call_is_answered(hostile: Sandbox) -> None:
    called: list[str] = []

    async def on_call(pack: str, tool: str, args: list[Any], kwargs: dict[str, Any]) -> Any:
        called.append(tool)

    def on_sites(sites: list[Any]) -> RunError | None:
        assert sites == [("demo", "echo", 0, [], 1, 1)]
        return RunError("UnknownTool", "no such tool", 1, 1, origin="host")

    body = f'send(b\'{{"op": "sites", "sites": [{SITE.decode()}]}}\')\ncall(b\'"demo"\', b\'"echo"\')'
    result = await run_hostile(hostile, body, on_call=on_call, on_sites=on_sites)
    assert result.error == RunError("UnknownTool", "no such tool", 1, 1, origin="host") and called == []


async def test_a_restricted_snippet_sends_the_sites_its_source_shows(sandbox: Sandbox) -> None:
    seen: list[list[Any]] = []
    code = "import json\ndef f(d):\n    return d.echo(1)\ndemo.echo(1, x=2)\njson.dumps(1)\nmissing.tool(*[1])"
    result = await sandbox.run(code, packs=PACKS, on_call=make_on_call(), on_sites=seen.append)
    assert result.error is not None and result.error.type == "NameError" and result.error.line == 6
    # Not d (a parameter), not json (a module): the pack call with its shape, and the unknown name.
    assert seen == [[("demo", "echo", 1, ["x"], 4, 1), ("missing", "tool", 1, None, 6, 1)]]
