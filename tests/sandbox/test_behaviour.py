"""What a snippet can do, and how each way of ending comes back."""

from __future__ import annotations

import contextvars
import os
import signal
import time
from typing import Any

import anyio
import pytest

from sandbox import Limits, RunError, Sandbox, ToolError
from sandbox.host._run import C_STACK_OVERFLOW
from sandbox.worker.policy import MAX_NODES
from tests.sandbox.conftest import PACKS, make_on_call

pytestmark = pytest.mark.anyio


async def run(box: Sandbox, code: str, **kw: Any) -> Any:
    return await box.run(code, packs=PACKS, on_call=make_on_call(), **kw)


PLEASANT = [
    ("1 + 1", 2),
    ("x = 5", None),
    ("", None),
    ("d = {}\nfor w in 'a b a'.split():\n    d[w] = d.get(w, 0) + 1\nd['a'] += 10\nd", {"a": 12, "b": 1}),
    ("sorted([3, 1, 2], reverse=True)", [3, 2, 1]),
    ("list(zip([1, 2], 'ab'))", [[1, "a"], [2, "b"]]),
    ("[i * v for i, v in enumerate([5, 6])]", [0, 6]),
    ("min(3, 1), max([4, 9]), sum(range(4)), any([0, 1]), all([])", [1, 9, 6, True, True]),
    ("list(map(str, filter(lambda n: n % 2, range(5))))", ["1", "3"]),
    ("isinstance(1, int), {k: v for k, v in [('a', 1)]}, {n % 3 for n in range(9)}", [True, {"a": 1}, [0, 1, 2]]),
    ("name = 'x'\nf'{name!r}:{3.14159:.2f}'", "'x':3.14"),
    ("try:\n    1 / 0\nexcept ZeroDivisionError as e:\n    r = str(e)\nr", "division by zero"),
    ("def fib(n):\n    return n if n < 2 else fib(n - 1) + fib(n - 2)\nfib(15)", 610),
    (
        "class Counter:\n    def __init__(self):\n        self.n = 0\n    def add(self, k):\n        self.n += k\n"
        "        return self\nc = Counter().add(2).add(3)\nc.n",
        5,
    ),
    ("a, (b, c) = 1, (2, 3)\nfor x, y in [(1, 2)]:\n    pass\na + b + c + x + y", 9),
    ("n = 0\nwhile n < 10:\n    n += 3\nn", 12),
    (
        "import json, re, math\njson.loads(json.dumps({'a': [1]})), re.findall(r'\\d', 'a1b2'), math.floor(2.5)",
        [{"a": [1]}, ["1", "2"], 2],
    ),
    (
        "from datetime import datetime, timedelta\n(datetime(2020, 1, 1) + timedelta(days=1)).isoformat()",
        "2020-01-02T00:00:00",
    ),
    ("from collections import Counter\nCounter('aab').most_common(1)", [["a", 2]]),
    (
        "import itertools, statistics, textwrap, base64, hashlib, random\n"
        "len(list(itertools.permutations([1, 2, 3]))), statistics.mean([1, 2, 3]), textwrap.dedent('  a'),"
        " base64.b64encode(b'hi').decode(), hashlib.sha256(b'').hexdigest()[:4], random.Random(1).randint(1, 1)",
        [6, 2, "a", "aGk=", "e3b0", 1],
    ),
    ("'{} and {x}'.format(1, x=2), '{a}'.format_map({'a': 3})", ["1 and 2", "3"]),
    (
        "class E(Exception):\n    def __init__(self, m):\n        super().__init__(m)\ntry:\n    raise E('bad')\n"
        "except E as e:\n    r = str(e)\nr",
        "bad",
    ),
    ("(1, 2), {3, 1}, {1: 'a'}, object", [[1, 2], [1, 3], {"1": "a"}, "<class 'object'>"]),
    ("float('nan'), float('inf')", ["nan", "inf"]),
    ("sorted(dir(demo))", ["boom", "echo", "fail", "image"]),
]


@pytest.mark.parametrize(("code", "expected"), PLEASANT, ids=[c for c, _ in PLEASANT])
async def test_pleasant_code_works(sandbox: Sandbox, code: str, expected: Any) -> None:
    result = await run(sandbox, code)
    assert result.error is None, str(result.error)
    assert result.value == expected


async def test_print_is_captured_and_last_expression_is_the_value(sandbox: Sandbox) -> None:
    result = await run(sandbox, "print('hello', 1)\nprint('x', end='')\n42")
    assert (result.value, result.output, result.ok) == (42, "hello 1\nx", True)


async def test_pack_calls_cross_as_json(sandbox: Sandbox) -> None:
    code = "r = demo.echo(1, (2, 3), key={'a': {1, 2}})\nimg = demo.image()\nr, img"
    result = await run(sandbox, code)
    assert result.value == [
        {"args": [1, [2, 3]], "kwargs": {"key": {"a": [1, 2]}}},
        {"type": "image", "data": "aGVsbG8=", "mimeType": "image/png"},
    ]
    assert result.calls == 2


async def test_unknown_tool_goes_to_on_call(sandbox: Sandbox) -> None:
    result = await run(sandbox, "demo.ech()")
    assert result.error is not None and result.error.type == "ToolError"
    assert "did you mean echo" in result.error.message
    assert result.calls == 1


async def test_on_call_errors_are_catchable_tool_errors(sandbox: Sandbox) -> None:
    code = (
        "out = []\nfor t in (demo.fail, demo.boom):\n    try:\n        t()\n    except ToolError as e:\n"
        "        out.append(str(e))\nout"
    )
    result = await run(sandbox, code)
    assert result.value == ["demo.fail failed on purpose", "upstream exploded"]


async def test_errors_name_type_line_and_source(sandbox: Sandbox) -> None:
    result = await run(sandbox, "a = 1\nb = 2\nx = 1/0")
    assert result.error == RunError("ZeroDivisionError", "division by zero", 3, None, "x = 1/0", origin="code")
    assert str(result.error) == "ZeroDivisionError: division by zero (line 3: `x = 1/0`)"


async def test_syntax_error_has_line_column_and_text(sandbox: Sandbox) -> None:
    result = await run(sandbox, "x = 1\ny = (2 +\n")
    assert result.error is not None and result.error.type == "SyntaxError"
    assert result.error.line == 2 and result.error.column is not None


async def test_code_past_the_node_budget_is_refused_before_it_is_checked_or_compiled(sandbox: Sandbox) -> None:
    # One run's pre-check and compile cost the worker microseconds a syntax node, whatever shape the code has.
    fields = "f'" + "{1}" * 33_000 + "'"
    spelled = "\n".join(f"y{i} = len(str({i}))" for i in range(5000))
    for code in (fields, spelled):
        result = await run(sandbox, code)
        assert result.error is not None and (result.error.type, result.error.origin) == ("LimitError", "code")
        assert f"more than {MAX_NODES:,} syntax nodes" in result.error.message
    below = "\n".join(f"y{i} = len(str({i}))" for i in range(2000)) + "\ny1999"
    assert (await run(sandbox, below)).value == 4


async def test_policy_errors_say_what_to_do(sandbox: Sandbox) -> None:
    private = await run(sandbox, "x = 1\nx.__dict__")
    assert private.error is not None and private.error.type == "PolicyError" and private.error.line == 2
    assert "names starting with '_' are private" in private.error.message
    imported = await run(sandbox, "import os")
    assert imported.error is not None and "allowed modules: base64, collections" in imported.error.message


async def test_tool_error_from_pack_ends_run_when_uncaught(sandbox: Sandbox) -> None:
    result = await run(sandbox, "demo.fail()")
    assert result.error == RunError("ToolError", "demo.fail failed on purpose", 1, None, "demo.fail()", origin="tool")


async def test_max_calls(sandbox: Sandbox) -> None:
    code = "for i in range(10):\n    try:\n        demo.echo(i)\n    except Exception:\n        pass"
    result = await run(sandbox, code, limits=Limits(max_calls=3))
    assert result.error is not None and result.error.type == "LimitError"
    assert "max_calls" in result.error.message and result.calls == 3


async def test_output_is_cut_with_a_note(sandbox: Sandbox) -> None:
    result = await run(sandbox, "print('x' * 2500)\n1", limits=Limits(max_output=1000))
    assert result.value == 1
    assert result.output.startswith("x" * 1000) and "1501 more bytes of output cut" in result.output


@pytest.mark.parametrize(
    ("code", "kind"),
    [
        ("while True:\n    pass", "TimeoutError"),
        ("10**10**10", "TimeoutError"),
        ("'a' * 10**10", "MemoryError"),
        ("x = []\nwhile True:\n    x.append('y' * 10**6)", "MemoryError"),
        ("def f(n):\n    return f(n + 1)\nf(0)", "RecursionError"),
        ("while True:\n    print('flood' * 100)", "LimitError"),
        ("while True:\n    demo.echo(1)", "LimitError"),
        ("raise SystemExit(3)", "SystemExit"),
        ("raise KeyboardInterrupt", "KeyboardInterrupt"),
    ],
)
async def test_exhaustion_ends_with_a_clear_error(sandbox: Sandbox, code: str, kind: str) -> None:
    limits = Limits(timeout=2.0, memory_mb=128)
    started = time.monotonic()
    result = await run(sandbox, code, limits=limits)
    assert time.monotonic() - started < limits.timeout + 2
    assert result.error is not None and result.error.type == kind, str(result.error)
    if kind == "TimeoutError":
        assert result.error.message in (
            "run exceeded the 2.0 s time limit (sandbox.timeout)",
            "run exceeded its 2.0 s CPU time limit (sandbox.cpu_seconds)",
        )
    assert (await run(sandbox, "1 + 1")).value == 2


async def test_timeout_cancels_in_flight_on_call_and_keeps_context() -> None:
    var: contextvars.ContextVar[str] = contextvars.ContextVar("run_id", default="none")
    seen: list[str] = []
    cancelled = anyio.Event()

    async def slow(pack: str, tool: str, args: list[Any], kwargs: dict[str, Any]) -> Any:
        seen.append(var.get())
        try:
            await anyio.sleep(30)
        except anyio.get_cancelled_exc_class():
            cancelled.set()
            raise

    async with Sandbox(warm=1) as box:
        var.set("run-42")
        result = await box.run("demo.slow()", packs=PACKS, on_call=slow, limits=Limits(timeout=0.5))
    assert result.error is not None and result.error.type == "TimeoutError"
    assert seen == ["run-42"] and cancelled.is_set()


async def test_runs_are_isolated_and_concurrent() -> None:
    async with Sandbox(Limits(timeout=3.0), warm=3) as box:
        first = await box.run("x = 1\nx", packs={}, on_call=make_on_call())
        second = await box.run("x", packs={}, on_call=make_on_call())
        assert first.value == 1 and second.error is not None and second.error.type == "NameError"
        results: dict[str, Any] = {}

        async def one(name: str, code: str) -> None:
            started = time.monotonic()
            results[name] = (await box.run(code, packs={}, on_call=make_on_call()), time.monotonic() - started)

        async with anyio.create_task_group() as tg:
            tg.start_soon(one, "hostile", "while True:\n    pass")
            await anyio.sleep(0.2)
            for i in range(3):
                tg.start_soon(one, f"quick{i}", f"{i} * 2")
        assert results["hostile"][0].error.type == "TimeoutError"
        for i in range(3):
            assert results[f"quick{i}"][0].value == i * 2
            assert results[f"quick{i}"][1] < 2.0


async def test_worker_crash_is_worker_crashed_and_cancels_its_calls(sandbox: Sandbox) -> None:
    cancelled = anyio.Event()

    async def abort_worker(pack: str, tool: str, args: list[Any], kwargs: dict[str, Any]) -> Any:
        # Restricted code cannot crash its worker: the pack call is our moment to do it from outside.
        (worker,) = (w for w in sandbox._live if w.taken)
        os.kill(worker.pid, signal.SIGABRT)
        try:
            await anyio.sleep(30)
        except anyio.get_cancelled_exc_class():
            cancelled.set()  # the gateway's call is cancelled, and with it the upstream's (notifications/cancelled)
            raise

    result = await sandbox.run("demo.echo(1)", packs={"demo": ["echo"]}, on_call=abort_worker)
    assert result.error is not None and result.error.type == "WorkerCrashed"
    assert "SIGABRT" in result.error.message and result.error.origin == "host"
    assert cancelled.is_set()


async def test_a_c_stack_overflow_is_the_snippets_recursion_error(sandbox: Sandbox) -> None:
    """hash() of deeply nested tuples recurses in C without a depth check and kills the worker with SIGSEGV:
    the snippet's data did it, so it is the snippet's error, not a crash of the host's worker."""
    code = "t = ()\nfor _ in range(1_000_000):\n    t = (t,)\nhash(t)"
    result = await run(sandbox, code, limits=Limits(timeout=20.0))
    assert result.error is not None and result.error.origin == "code"
    assert (result.error.type, result.error.message) == ("RecursionError", C_STACK_OVERFLOW)
    assert (await run(sandbox, "1 + 1")).value == 2


async def test_no_worker_left_after_exit() -> None:
    async with Sandbox(warm=3) as box:
        await box.run("1", packs={}, on_call=make_on_call())
        pids = [w.pid for w in box._live]
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


async def test_tool_error_class_is_exported() -> None:
    assert issubclass(ToolError, Exception)


async def test_registered_pack_names_starting_with_underscore_are_usable(sandbox: Sandbox) -> None:
    packs = {"_123x": ["echo"], "__dunder": ["echo"], "_getattr_": ["echo"]}
    ok = await sandbox.run("_123x.echo(1)", packs=packs, on_call=make_on_call())
    assert ok.error is None and ok.value == {"args": [1], "kwargs": {}}
    for name in ("__dunder", "_getattr_"):  # never a dunder, never a guard's name
        refused = await sandbox.run(f"{name}.echo(1)", packs=packs, on_call=make_on_call())
        assert refused.error is not None and refused.error.type == "PolicyError", name


@pytest.mark.parametrize(
    ("code", "construct"),
    [
        ("await demo.echo(1)", "'await'"),
        ("x = [await demo.echo(i) for i in range(2)]", "'await'"),
        ("async def f():\n    return await demo.echo(1)\nf()", "'async def'"),
        ("async def f():\n    async for x in y:\n        pass", "'async def'"),
    ],
)
async def test_async_code_is_told_that_calls_are_synchronous(sandbox: Sandbox, code: str, construct: str) -> None:
    """A model used to async tools writes `await`: it gets a hint, and the worker never crashes on it."""
    result = await sandbox.run(code, packs=PACKS, on_call=make_on_call())
    assert result.error is not None and result.error.type == "PolicyError", result
    assert result.error.message.startswith(f"{construct} is not needed: pack calls are synchronous")
    assert result.error.line == 1


async def test_a_tool_error_carries_the_server_tool_and_origin_the_host_gave_it(sandbox: Sandbox) -> None:
    """What on_call raises reaches the snippet with its server, the call's tool and its origin; what the host
    cannot vouch for (an origin of no known kind, a server name that is no text) is not passed on as it came."""

    async def on_call(pack: str, tool: str, args: list[Any], kwargs: dict[str, Any]) -> Any:
        if tool == "upstream":
            raise ToolError("it failed", server="the-server", origin="tool")
        if tool == "forged":
            raise ToolError("odd", server=123, origin="root")  # type: ignore[arg-type]
        if tool == "long":
            raise ToolError("long", server="s" * 1000, origin="host")
        raise RuntimeError("the host broke")

    code = (
        "out = []\nfor f in (demo.upstream, demo.forged, demo.long, demo.boom):\n    try:\n        f()\n"
        "    except ToolError as e:\n"
        "        out.append([e.server and e.server[:3], len(e.server or ''), e.tool, e.origin, str(e)])\nout"
    )
    packs = {"demo": ["upstream", "forged", "long", "boom"]}
    result = await sandbox.run(code, packs=packs, on_call=on_call)
    assert result.value == [
        ["the", 10, "upstream", "tool", "it failed"],
        [None, 0, "forged", "host", "odd"],
        ["sss", 128, "long", "host", "long"],
        [None, 0, "boom", "host", "the host broke"],
    ], result.error
