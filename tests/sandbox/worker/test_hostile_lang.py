"""Focused checks of the language layer's root fixes, where a corpus entry's "blocked or harmless" is too weak."""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from types import CodeType, FrameType, FunctionType, ModuleType
from typing import Any

import pytest

from sandbox import Limits, Sandbox
from sandbox.protocol.errors import PolicyError
from sandbox.worker._exports import EXPORTS
from sandbox.worker._guards import SnippetClass, make_globals, make_guards
from sandbox.worker._jsonable import to_json
from sandbox.worker._modules import NAMESPACES
from sandbox.worker._record import Record
from sandbox.worker.policy import GUARD_NAMES, RESULT_NAME, CompileFailure, compile_restricted
from tests.sandbox.conftest import PACKS, make_on_call
from tests.sandbox.worker.strict import footholds

pytestmark = pytest.mark.anyio


class _Collector:
    def __init__(self) -> None:
        self.printed: list[str] = []

    def _call_print(self, *objects: Any, **kwargs: Any) -> None:
        self.printed.append(" ".join(map(str, objects)))


def run_lang(code: str, **extra: Any) -> tuple[Any, dict[str, Any]]:
    """The language layer alone, in this process; the value, and the namespace it ran in."""
    collector = _Collector()
    compiled = compile_restricted(code, make_guards(lambda _getattr=None: collector))
    namespace = make_globals(extra)
    exec(compiled, namespace)
    return namespace.get(RESULT_NAME), namespace


def _code_objects(code: CodeType) -> Iterator[CodeType]:
    yield code
    for const in code.co_consts:
        if isinstance(const, CodeType):
            yield from _code_objects(const)


# --- 7. guards cannot be rebound -------------------------------------------------------------------------

EVERY_GUARD = (
    "class A:\n    def __init__(self):\n        super().__init__()\n        self.n = 0\n"
    "a = A()\na.n += 1\nd = {'k': 1}\nd['k'] += 1\nx, (y, z) = 1, (2, 3)\n"
    "for i, j in [(1, 2)]:\n    print(i, j)\ndef f(*args, **kw):\n    return [v for v in args]\n"
    "f(*[1], **{'a': 2})\nn = 0\nn += 1\n"
)


def test_guards_are_constants_of_the_code_not_names() -> None:
    compiled = compile_restricted(EVERY_GUARD, make_guards(lambda _getattr=None: _Collector()))
    names = {name for code in _code_objects(compiled) for name in code.co_names}
    assert not names & GUARD_NAMES
    assert not set(make_globals({})) & GUARD_NAMES


def test_guard_set_is_complete() -> None:
    assert set(make_guards(lambda _getattr=None: None)) == GUARD_NAMES


def test_a_leaked_globals_dict_cannot_rebind_the_guards() -> None:
    # Hand the snippet its own globals, as an escape would: writing guard names there changes nothing.
    collector = _Collector()
    code = (
        "for name in ['_getattr_', '_getitem_', '_getiter_', '_write_', '_print_', '__metaclass__']:\n"
        "    leak[name] = lambda *a: 'pwned'\n"
        "class X:\n    pass\nx = X()\nx.n = 5\n"
        "leak['__builtins__']['getattr'] = lambda *a: 'pwned'\n"
        "x.n, [1, 2][1], [v for v in [3]], getattr(x, 'n')"
    )
    compiled = compile_restricted(code, make_guards(lambda _getattr=None: collector))
    namespace = make_globals({})
    namespace["leak"] = namespace
    exec(compiled, namespace)
    value = namespace[RESULT_NAME]
    assert value[:3] == (5, 2, [3]) and isinstance(namespace["X"], SnippetClass)
    assert value[3] == "pwned"  # the snippet's own builtins dict is the snippet's; the guards are not in it


def test_guard_tokens_differ_per_compile() -> None:
    first, second = (compile_restricted("x = 1\nx.real", make_guards(lambda _getattr=None: None)) for _ in range(2))
    assert first.co_consts == second.co_consts  # the tokens are gone, replaced by the same guard functions
    assert not any(isinstance(c, str) and c.startswith("\0guard") for c in first.co_consts)


# --- 5. str.format -----------------------------------------------------------------------------------------

FORMAT_ROUTES = [
    "'{0.__class__.__base__}'.format(1)",
    "'{x.__class__.__base__}'.format_map({'x': 1})",
    "str.format('{0.__class__.__base__}', 1)",
    "str.format_map('{x.__class__.__base__}', {'x': 1})",
    "type('').format('{0.__class__.__base__}', 1)",
    "getattr(str, 'format')('{0.__class__.__base__}', 1)",
    "getattr('{0.__class__.__base__}', 'format')(1)",
    "class S(str):\n    pass\nS('{0.__class__.__base__}').format(1)",
    "class S(str):\n    pass\nS.format('{0.__class__.__base__}', 1)",
    "class S(str):\n    pass\nsuper(S, S).format('{0.__class__.__base__}', 1)",
    "class S(str):\n    def f(self):\n        return super(S, self).format(1)\nS('{0.__class__.__base__}').f()",
    "class S(str):\n    def f(self):\n        return super().format_map({'x': 1})\nS('{x.__class__.__base__}').f()",
    "list(map(str.format, ['{0.__class__.__base__}'], [1]))",
    "import itertools\nlist(itertools.starmap(str.format, [('{0.__class__.__base__}', 1)]))",
    "'{0:{1.__class__.__base__}}'.format(1, 2)",
    "'{0[0].__class__.__base__}'.format([1])",
    "'{0.format}'.format('{0.__class__.__base__}')",  # the handed-out method is ours: a repr, no traversal
]


@pytest.mark.parametrize("code", FORMAT_ROUTES)
def test_every_route_to_str_format_goes_through_the_guard(code: str) -> None:
    try:
        value, _ = run_lang(code)
    except PolicyError as exc:
        assert "'__base__' is not allowed" in str(exc)  # __class__ reads as type(): the step after it is refused
    else:
        assert "SafeFormats.__init__.<locals>.bound_format" in value and "class" not in value


# --- 6. exceptions -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("code", "expected"),
    [
        (
            "import json\ntry:\n    json.dumps.nope\nexcept AttributeError as e:\n    r = e.obj, e.name\nr",
            ("<function object>", "nope"),
        ),
        (
            "try:\n    len.nope\nexcept AttributeError as e:\n    r = '{0.obj}'.format(e)\nr",
            "<builtin_function_or_method object>",
        ),
        ("try:\n    {}[len]\nexcept KeyError as e:\n    r = e.args\nr", ("<builtin_function_or_method object>",)),
        (
            "def g():\n    return len\n    yield\ntry:\n    next(g())\nexcept StopIteration as e:\n    r = e.value\nr",
            "<builtin_function_or_method object>",
        ),
        ("import json\ntry:\n    json.nope\nexcept AttributeError as e:\n    r = e.obj\nr", "<ModuleNamespace object>"),
        # The snippet's own data stays as it is.
        ("try:\n    (1).nope\nexcept AttributeError as e:\n    r = e.obj, e.name\nr", (1, "nope")),
        ("try:\n    {}[('a', 1)]\nexcept KeyError as e:\n    r = e.args\nr", ((("a", 1),))),
        (
            "import datetime\nclass E(Exception):\n    def __init__(self, when):\n        super().__init__('late')\n"
            "        self.when = when\ntry:\n    raise E(datetime.date(2020, 1, 2))\nexcept E as e:\n"
            "    r = e.when.year, e.args\nr",
            (2020, ("late",)),
        ),
    ],
)
def test_exception_payloads_reach_the_snippet_as_data_only(code: str, expected: Any) -> None:
    value, namespace = run_lang(code)
    assert value == expected
    assert not footholds(value, namespace)


def test_exit_gets_the_exception_but_no_traceback() -> None:
    code = (
        "class X:\n    def __enter__(self):\n        return self\n"
        "    def __exit__(self, kind, value, tb):\n        self.seen = (kind is ZeroDivisionError, str(value), tb)\n"
        "        return True\nx = X()\nwith x:\n    1/0\nx.seen"
    )
    assert run_lang(code)[0] == (True, "division by zero", None)


# --- 8. exports --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("module", sorted(EXPORTS))
def test_each_module_offers_exactly_its_allow_list(module: str) -> None:
    value, _ = run_lang(f"import {module}\ndir({module})")
    assert value == sorted(EXPORTS[module])
    assert not any(
        isinstance(v, ModuleType | FunctionType) and v.__module__ == "os" for v in vars(NAMESPACES[module]).values()
    )


def test_a_dropped_name_says_what_exists() -> None:
    with pytest.raises(AttributeError, match="module 'base64' has no 'main' in the sandbox; it has: a85decode"):
        run_lang("import base64\nbase64.main")
    with pytest.raises(CompileFailure) as failure:
        run_lang("from json import decoder")
    assert "module 'json' has no 'decoder' in the sandbox; it has: JSONDecodeError" in failure.value.message


# --- type() ------------------------------------------------------------------------------------------------


def test_type_answers_for_types_the_snippet_can_name() -> None:
    code = (
        "import datetime, collections\nclass X:\n    pass\n"
        "[type(1) is int, type(None)(), isinstance(int, type), isinstance(1, type), type(X()) is X,"
        " type(datetime.date(2020, 1, 1)) is datetime.date, type(collections.Counter()) is collections.Counter,"
        " isinstance('a', (str, type(None))), issubclass(X, object)]"
    )
    assert run_lang(code)[0] == [True, None, True, False, True, True, True, True, True]
    with pytest.raises(PolicyError, match="type\\(\\) of a 'function' object is not available"):
        run_lang("type(lambda: 0)")


# --- the dunders a snippet may read -----------------------------------------------------------------------


def test_error_handling_reads_names_docs_and_classes() -> None:
    code = (
        "class X:\n    'an X'\n    def f(self):\n        'f of X'\n"
        "try:\n    1/0\nexcept Exception as e:\n    caught = e\n"
        "[type(caught).__name__, caught.__class__.__name__, caught.__class__ is ZeroDivisionError,"
        " getattr(caught, '__class__') is ZeroDivisionError, '{0.__class__.__name__}'.format(caught),"
        " X.__name__, X.__doc__, X().__class__ is X, X().f.__name__, X().f.__doc__, len.__name__,"
        " (1).__class__ is int, ToolError.__name__, hasattr(1, '__class__')]"
    )
    assert run_lang(code)[0] == [
        "ZeroDivisionError",
        "ZeroDivisionError",
        True,
        True,
        "ZeroDivisionError",
        "X",
        "an X",
        True,
        "f",
        "f of X",
        "len",
        True,
        "ToolError",
        True,
    ]


@pytest.mark.parametrize(
    ("code", "refused"),
    [
        ("(lambda: 0).__class__", "type() of a 'function' object is not available"),
        ("int.__class__", "type() of a 'type' object is not available"),
        ("class X:\n    pass\nX.__class__", "type() of a 'SnippetClass' object is not available"),
        ("import json\njson.__class__", "type() of a 'ModuleNamespace' object is not available"),
        ("getattr((1).__class__, '__base__')", "'__base__' is not allowed"),
        ("def g():\n    yield\nx = g()\nnext(x)\ngetattr(x, 'gi_frame').__name__", "'gi_frame' is not allowed"),
        ("class X:\n    pass\nsetattr(X(), '__class__', int)", "'__class__' is not allowed"),
    ],
)
def test_the_readable_dunders_lead_nowhere(code: str, refused: str) -> None:
    with pytest.raises(PolicyError, match=re.escape(refused)):
        run_lang(code)


@pytest.mark.parametrize("code", ["x = []\nx.__class__ = dict", "def f(): pass\nf.__name__ = 'g'", "del len.__doc__"])
def test_the_readable_dunders_are_read_only(code: str) -> None:
    with pytest.raises(CompileFailure, match="is not allowed"):
        run_lang(code)


def test_a_record_key_never_reads_as_a_dunder() -> None:
    """A pack's JSON object reads its keys as attributes; ``__name__`` and ``__doc__`` stay the object's own."""
    record = Record({"__name__": "forged", "__doc__": "forged", "name": "real"})
    assert run_lang("r.__doc__, getattr(r, '__name__', 'none'), r.name", r=record)[0] == (None, "none", "real")


# --- to_json against the snippet's subclasses --------------------------------------------------------------


class _Lying(float):
    def __float__(self) -> float:
        return math.nan

    def __repr__(self) -> str:
        raise SystemExit(1)


class _Items(dict[Any, Any]):
    def items(self) -> Any:
        return [(len, len)]

    def __iter__(self) -> Any:
        raise SystemExit(1)


class _Iter(list[Any]):
    def __iter__(self) -> Any:
        return iter([len])


class _Int(int):
    def bit_length(self) -> int:
        return 0

    def __int__(self) -> int:
        return 10**5000


class _Str(str):
    def __str__(self) -> Any:
        return 1


class _Unordered:
    def __lt__(self, other: Any) -> bool:
        raise SystemExit(1)

    def __repr__(self) -> str:
        return "u"


def test_to_json_reads_data_through_the_base_types() -> None:
    assert to_json(_Lying(1.5)) == 1.5 and type(to_json(_Lying(1.5))) is float
    assert to_json(_Items(a=1)) == {"a": 1}
    assert to_json(_Iter([1])) == [1]
    assert to_json(_Int(7)) == 7 and type(to_json(_Int(7))) is int
    assert to_json(_Str("x")) == "x" and type(to_json(_Str("x"))) is str
    assert to_json({_Str("k"): 1, _Int(2): 2}) == {"k": 1, "2": 2}
    assert to_json({_Unordered(), 2, "a", 1.5}) == [1.5, 2, "a", "u"]
    assert to_json([_Lying("nan")]) == ["nan"]


def test_to_json_survives_any_repr() -> None:
    class Boom:
        def __repr__(self) -> str:
            raise KeyboardInterrupt

    class Sub:
        def __repr__(self) -> str:
            return _Str("sneaky")

    assert to_json([Boom(), Sub()]) == ["<Boom object>", "sneaky"]
    assert type(to_json(Sub())) is str


def test_footholds_sees_what_the_old_corpus_check_missed() -> None:
    globals_dict = make_globals({})
    frame: FrameType | None = None
    try:
        raise ValueError
    except ValueError as exc:
        assert exc.__traceback__ is not None
        frame = exc.__traceback__.tb_frame
    for bad in (
        object.__subclasses__(),
        type(lambda: 0),
        NAMESPACES["json"],
        len,
        "".join,
        frame,
        globals_dict,
        {"x": math},
    ):
        assert footholds(bad, globals_dict), bad
    assert not footholds([1, "a", {"b": (2.5, None)}, int, PolicyError("x")], globals_dict)


# --- through the worker: hostile __str__ is the snippet's error --------------------------------------------


async def run(box: Sandbox, code: str) -> Any:
    return await box.run(code, packs=PACKS, on_call=make_on_call(), limits=Limits(timeout=5.0))


@pytest.mark.parametrize("raised", ["SystemExit(1)", "KeyboardInterrupt", "ValueError('no')", "RecursionError"])
async def test_an_exception_whose_str_raises_is_reported(sandbox: Sandbox, raised: str) -> None:
    code = f"class E(Exception):\n    def __str__(self):\n        raise {raised}\nx = 1\nraise E()"
    result = await run(sandbox, code)
    assert result.error is not None and result.error.type == "E" and result.error.line == 5
    assert "its __str__ raised" in result.error.message


async def test_a_value_whose_repr_raises_system_exit_is_reported(sandbox: Sandbox) -> None:
    result = await run(sandbox, "class X:\n    def __repr__(self):\n        raise SystemExit(2)\n[X(), 1]")
    assert result.value == ["<X object>", 1]


async def test_print_takes_str_subclasses_as_plain_text(sandbox: Sandbox) -> None:
    code = (
        "class S(str):\n    def encode(self, *a, **k):\n        return 1\n"
        "class X:\n    def __str__(self):\n        return S('hi')\nprint(X(), end=S('!'))"
    )
    result = await run(sandbox, code)
    assert result.error is None and result.output == "hi!"


async def test_print_to_a_file_is_refused(sandbox: Sandbox) -> None:
    result = await run(sandbox, "class F:\n    def write(self, s):\n        pass\nprint('x', file=F())")
    assert result.error is not None and result.error.type == "PolicyError" and "print(file=...)" in result.error.message


# --- records: a JSON object from a pack call reads its keys as attributes, and nothing more ---------------

RECORD_ESCAPES = [
    "demo.echo(x=1).kwargs.__class__",
    "getattr(demo.echo(x=1).kwargs, '__getattr__')",
    "getattr(demo.echo(x=1).kwargs, '_'.join(['', '_class', '_']))",
    "getattr(demo.echo(**{'_k': 1}).kwargs, '_k')",
    "type(demo.echo(x=1).kwargs).__mro__",
    "'{0.__class__}'.format(demo.echo(x=1).kwargs)",
]


@pytest.mark.parametrize("code", RECORD_ESCAPES)
async def test_a_record_gives_no_foothold(sandbox: Sandbox, code: str) -> None:
    result = await sandbox.run(code, packs=PACKS, on_call=make_on_call())
    assert result.error is not None and result.error.type in ("PolicyError", "SyntaxError"), result
