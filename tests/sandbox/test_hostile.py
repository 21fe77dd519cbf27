"""A corpus of hostile snippets, run through the language layer on its own and through both layers together
(the OS layer on its own: tests/sandbox/test_os_layer.py).

Each must end without a secret (host env canary, host closure canary), file content or a dead host.
"""

from __future__ import annotations

from types import CodeType, FrameType, ModuleType, TracebackType
from typing import Any

import pytest

from sandbox import Sandbox
from sandbox.guards import make_globals
from sandbox.policy import RESULT_NAME, CompileFailure, compile_restricted
from tests.sandbox.conftest import PACKS, assert_no_leak, make_on_call

pytestmark = pytest.mark.anyio

# (id, code, safe to exec in the test process under the language layer alone)
CORPUS: list[tuple[str, str, bool]] = [
    ("subclasses", "().__class__.__bases__[0].__subclasses__()", True),
    ("mro", "''.__class__.__mro__[1].__subclasses__()", True),
    ("globals_of_function", "def f(): pass\nf.__globals__", True),
    ("builtins_name", "__builtins__", True),
    ("builtins_attr", "(lambda: 0).__builtins__", True),
    ("import_dunder", "__import__('os').environ", True),
    ("getattr_built", "getattr(1, '__cl' + 'ass__')", True),
    ("getattr_join", "getattr(type(1), ''.join(['__', 'subclasses', '__']))()", True),
    ("getattr_default", "getattr(len, '__self__', None)", True),
    ("nfkc_getattr", "ｇetattr(1, '__class__')", True),
    ("nfkc_underscore", "x = 1\nx._﹍class__", True),
    ("nfkc_attr_string", "getattr(1, '\uff3f\uff3fclass\uff3f\uff3f')", True),
    ("gen_frame", "g = (i for i in [1])\ng.gi_frame.f_globals", True),
    ("gen_frame_getattr", "g = (i for i in [1])\ngetattr(g, 'gi_' + 'frame')", True),
    ("gen_code", "def g():\n    yield 1\ng().gi_code", True),
    ("tb_frame", "try:\n    1/0\nexcept Exception as e:\n    t = e.__traceback__\nt.tb_frame.f_back.f_globals", True),
    ("tb_getattr", "try:\n    1/0\nexcept Exception as e:\n    t = getattr(e, '__traceback__')\nt", True),
    ("f_back", "def g():\n    yield\nx = g()\nnext(x)\ngetattr(x, 'gi_frame').f_back", True),
    ("format_class", "'{0.__class__}'.format(1)", True),
    ("format_globals", "def f(): pass\n'{0.__globals__}'.format(f)", True),
    ("format_map", "'{x.__class__.__mro__}'.format_map({'x': 1})", True),
    ("format_unbound", "str.format('{0.__class__}', 1)", True),
    ("format_getattr", "getattr('{0.__class__}', 'format')(1)", True),
    ("format_nested_spec", "'{0:{1.__class__}}'.format(1, 2)", True),
    ("fstring_dunder", "f'{(1).__class__}'", True),
    ("json_codecs", "import json\njson.codecs", True),
    ("json_decoder", "import json\njson.decoder.scanner", True),
    ("re_enum_sys", "import re\nre.enum.sys.modules", True),
    ("datetime_sys", "import datetime\ndatetime.sys", True),
    ("from_json_codecs", "from json import codecs", True),
    ("import_os", "import os\nos.environ", True),
    ("import_subprocess", "import subprocess", True),
    ("import_sys", "import sys\nsys.modules", True),
    ("import_builtins", "import builtins", True),
    ("collections_abc", "import collections.abc", True),
    ("random_os", "import random\nrandom._os", True),
    ("open_file", "open('/etc/passwd').read()", True),
    ("eval", "eval('1+1')", True),
    ("exec", "exec('x=1')", True),
    ("compile", "compile('1', 'f', 'eval')", True),
    ("globals", "globals()", True),
    ("vars", "vars()", True),
    ("breakpoint", "breakpoint()", True),
    ("type_three_args", "X = type('X', (), {})\nX.__dict__", True),
    ("type_of_function", "type(lambda: 0)", True),
    ("metaclass_kw", "class M(type):\n    pass\nclass X(metaclass=M):\n    pass", True),
    ("reduce", "class X:\n    def __reduce__(self):\n        return (print, ('hi',))\nX()", True),
    (
        "exception_args_frame",
        "try:\n    raise ValueError\nexcept ValueError as e:\n    e.with_traceback(None).__context__",
        True,
    ),
    ("write_module", "import json\njson.dumps = len", True),
    ("setattr_module", "import json\nsetattr(json, 'dumps', len)", True),
    ("setattr_dunder", "class X:\n    pass\nsetattr(X, '__getattr__', len)", True),
    ("pack_private", "demo._call", True),
    ("pack_getattr_private", "getattr(demo, '_call')", True),
    ("pack_tool_private", "demo.echo._call.__self__", True),
    ("print_file", "print('x', file=demo)", True),
    ("dir_no_args", "dir()", True),
    (
        "super_private",
        "class X:\n    def f(self):\n        return super().__getattribute__('__class__')\nX().f()",
        True,
    ),
    ("string_formatter", "import string", True),
    ("tool_error_tb", "try:\n    demo.fail()\nexcept ToolError as e:\n    r = e.__traceback__\nr", True),
    ("recursion", "def f():\n    return f()\nf()", False),
    ("memory", "'a' * 10**10", False),
    ("cpu", "while True:\n    pass", False),
    ("bigpow", "10**10**10", False),
    ("print_flood", "while True:\n    print('x' * 1000)", False),
    ("call_flood", "while True:\n    demo.echo(1)", False),
    ("deep_value", "x = []\nfor i in range(10000):\n    x = [x]\nx", False),
    ("self_ref", "x = []\nx.append(x)\nx", False),
]


def _blocked_or_harmless(code: str) -> Any:
    """The language layer alone, in this process: compile must refuse, or the run must fail harmlessly."""
    try:
        compiled = compile_restricted(code)
    except CompileFailure as failure:
        return failure
    printed: list[str] = []

    class Collector:
        def _call_print(self, *objects: Any, **kwargs: Any) -> None:
            printed.append(" ".join(map(str, objects)))

    namespace = make_globals(lambda _getattr=None: Collector(), {"demo": object()})
    try:
        exec(compiled, namespace)
    except Exception as exc:
        return exc
    return (namespace.get(RESULT_NAME), printed)


@pytest.mark.parametrize(("code", "in_process"), [(c, p) for _, c, p in CORPUS], ids=[i for i, _, _ in CORPUS])
def test_language_layer_alone(code: str, in_process: bool) -> None:
    if not in_process:
        pytest.skip("resource exhaustion is for the OS layer; it would take down the test process")
    outcome = _blocked_or_harmless(code)
    assert_no_leak(outcome)
    if not isinstance(outcome, CompileFailure | Exception):
        value, _ = outcome
        assert not _internal(value), f"reached interpreter internals: {value!r}"


def _internal(value: Any) -> bool:
    """A module, frame, traceback, code object or namespace dict is where escapes continue from."""
    if isinstance(value, ModuleType | FrameType | TracebackType | CodeType):
        return True
    if isinstance(value, dict):
        return "__builtins__" in value or any(_internal(v) for v in value.values())
    if isinstance(value, list | tuple):
        return any(_internal(v) for v in value)
    return False


def test_corpus_is_big_enough() -> None:
    assert len(CORPUS) >= 50


@pytest.mark.parametrize("code", [c for _, c, _ in CORPUS], ids=[i for i, _, _ in CORPUS])
async def test_both_layers(sandbox: Sandbox, code: str) -> None:
    from sandbox import Limits

    result = await sandbox.run(code, packs=PACKS, on_call=make_on_call(), limits=Limits(timeout=2.0, memory_mb=128))
    assert_no_leak(result.value, result.output, str(result.error))
    assert not result.ok or result.value is None or "canary" not in repr(result.value)
    assert (await sandbox.run("1 + 1", packs={}, on_call=make_on_call())).value == 2
