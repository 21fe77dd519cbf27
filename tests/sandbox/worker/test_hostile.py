"""A corpus of hostile snippets, run through the language layer on its own and through both layers together
(the OS layer on its own: tests/sandbox/worker/test_os_layer.py).

Each must end without a secret (host env canary, host closure canary), file content or a dead host; under the
language layer alone the value must also hold no foothold (tests/sandbox/worker/strict.py): no class it could not name,
module, foreign function, frame, traceback or namespace dict.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from sandbox import Sandbox
from sandbox.worker._guards import make_globals, make_guards
from sandbox.worker._jsonable import safe_repr, to_json
from sandbox.worker.policy import RESULT_NAME, CompileFailure, compile_restricted
from tests.sandbox.conftest import PACKS, assert_no_leak, make_on_call
from tests.sandbox.worker.strict import footholds

pytestmark = pytest.mark.anyio

# (id, code, safe to exec in the test process under the language layer alone)
CORPUS: list[tuple[str, str, bool]] = [
    ("subclasses", "().__class__.__bases__[0].__subclasses__()", True),
    ("mro", "''.__class__.__mro__[1].__subclasses__()", True),
    ("globals_of_function", "def f(): pass\nf.__globals__", True),
    ("builtins_name", "__builtins__", True),
    ("builtins_attr", "(lambda: 0).__builtins__", True),
    ("import_dunder", "__import__('os').environ", True),
    ("getattr_built", "getattr(getattr(1, '__cl' + 'ass__'), '__ba' + 'se__')", True),
    ("getattr_join", "getattr(type(1), ''.join(['__', 'subclasses', '__']))()", True),
    ("getattr_default", "getattr(len, '__self__', None)", True),
    ("nfkc_getattr", "ｇetattr(ｇetattr(1, '__class__'), '__base__')", True),
    ("nfkc_underscore", "x = 1\nx._﹍class__", True),
    ("nfkc_attr_string", "getattr(int, '\uff3f\uff3fbase\uff3f\uff3f')", True),
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
    # 5. The real str.format reached around the guard; its fields read attributes unguarded.
    ("fmt_userstring", "import collections\ncollections.UserString('{0.__class__.__mro__}').format(1)", True),
    ("fmt_userstring_map", "import collections\ncollections.UserString('{x.__class__}').format_map({'x': 1})", True),
    (
        "fmt_userstring_data",
        "import collections\nclass D:\n    data = '{0.__globals__}'\ndef f(): pass\n"
        "collections.UserString.format(D(), f)",
        True,
    ),
    (
        "fmt_super",
        "class S(str):\n    def f(self):\n        return super(S, self).format\nS('{0.__class__.__mro__}').f()(1)",
        True,
    ),
    (
        "fmt_super_map",
        "class S(str):\n    def f(self):\n        return super(S, self).format_map\nS('{x.__class__}').f()({'x': 1})",
        True,
    ),
    ("fmt_super_class", "class S(str):\n    pass\nsuper(S, S).format('{0.__class__}', 1)", True),
    ("fmt_subclass_unbound", "class S(str):\n    pass\nS.format('{0.__class__}', 1)", True),
    ("fmt_subclass_bound", "class S(str):\n    pass\nS('{0.__class__}').format(1)", True),
    ("fmt_type_str", "type('').format('{0.__class__}', 1)", True),
    ("fmt_type_str_map", "type('x').format_map('{x.__class__}', {'x': 1})", True),
    ("fmt_str_format_map", "str.format_map('{x.__globals__}', {'x': len})", True),
    ("fmt_getattr_type", "getattr(type(''), 'format')('{0.__class__}', 1)", True),
    ("fmt_getattr_map", "getattr('{x.__class__}', 'format_map')({'x': 1})", True),
    ("fmt_map_builtin", "list(map(str.format, ['{0.__class__}'], [1]))", True),
    ("fmt_starmap", "import itertools\nlist(itertools.starmap(str.format, [('{0.__class__}', 1)]))", True),
    ("fmt_method_from_class", "f = str.format\nf('{0.__init__.__globals__}', demo)", True),
    ("fmt_bound_stored", "m = '{0.__class__}'.format\nd = {'m': m}\nd['m'](1)", True),
    ("fmt_property", "class P:\n    x = property(str.format)\nP().x", True),
    ("fmt_nested_field", "'{0.real.__class__}'.format(1)", True),
    ("fmt_item_then_attr", "'{0[0].__class__}'.format([1])", True),
    ("fmt_format_attr", "'{0.format}'.format('{0.__class__}')", True),
    ("fmt_spec_field", "'{0:{1.__class__}}'.format(1, 2)", True),
    ("fmt_frame_field", "g = (i for i in [1])\n'{0.gi_frame.f_globals}'.format(g)", True),
    (
        "fmt_builtin_format",
        "class X:\n    def __format__(self, spec):\n        return spec\nformat(X(), '{0.__class__}')",
        True,
    ),
    ("fmt_import_string", "from string import Formatter", True),
    ("fmt_statistics_reduce", "import statistics\nstatistics.reduce(str.format, ['{0.__class__}', 1])", True),
    # 6. Exceptions that carry objects (AttributeError.obj, args, StopIteration.value, __exit__'s traceback).
    ("exc_attr_obj", "import json\ntry:\n    json.dumps.nope\nexcept AttributeError as e:\n    r = e.obj\nr", True),
    (
        "exc_attr_obj_getattr",
        "try:\n    getattr(len, 'nope')\nexcept AttributeError as e:\n    r = getattr(e, 'obj')\nr",
        True,
    ),
    (
        "exc_attr_obj_format",
        "try:\n    len.nope\nexcept AttributeError as e:\n    r = '{0.obj.__self__}'.format(e)\nr",
        True,
    ),
    (
        "exc_attr_obj_walk",
        "import json\ntry:\n    '{0.nope}'.format(json.dumps)\nexcept AttributeError as e:\n"
        "    r = [e.obj, e.name, e.args]\nr",
        True,
    ),
    (
        "exc_namespace_obj",
        "import json\ntry:\n    json.nope\nexcept AttributeError as e:\n    r = e.obj, e.args\nr",
        True,
    ),
    ("exc_name_error", "try:\n    nope\nexcept NameError as e:\n    r = e.name, e.args\nr", True),
    (
        "exc_import_error",
        "try:\n    from json import decoder\nexcept ImportError as e:\n    r = e.name, e.path, e.args\nr",
        True,
    ),
    ("exc_key_error", "try:\n    {}[len]\nexcept KeyError as e:\n    r = e.args\nr", True),
    (
        "exc_stop_iteration",
        "it = iter([])\ntry:\n    next(it)\nexcept StopIteration as e:\n    r = e.value, e.args\nr",
        True,
    ),
    (
        "exc_stop_gen_value",
        "def g():\n    return len\n    yield\ntry:\n    next(g())\nexcept StopIteration as e:\n    r = e.value\nr",
        True,
    ),
    ("exc_with_traceback", "try:\n    1/0\nexcept Exception as e:\n    r = e.with_traceback(None)\nr", True),
    (
        "exc_traceback_getattr",
        "try:\n    1/0\nexcept Exception as e:\n    r = getattr(e, '__traceback__', None)\nr",
        True,
    ),
    (
        "exc_context_format",
        "try:\n    try:\n        1/0\n    except Exception:\n        {}['x']\nexcept KeyError as e:\n"
        "    r = '{0.__context__.__traceback__.tb_frame}'.format(e)\nr",
        True,
    ),
    (
        "exc_exit_traceback",
        "class X:\n    def __enter__(self):\n        return self\n    def __exit__(self, kind, value, tb):\n"
        "        self.tb = tb\n        return True\nx = X()\nwith x:\n    1/0\nx.tb",
        True,
    ),
    (
        "exc_exit_value_obj",
        "class X:\n    def __enter__(self):\n        return self\n    def __exit__(self, kind, value, tb):\n"
        "        self.obj = value.obj\n        return True\nx = X()\nwith x:\n    len.nope\nx.obj",
        True,
    ),
    (
        "exc_exit_staticmethod",
        "class X:\n    def __enter__(self):\n        return self\n    @staticmethod\n"
        "    def __exit__(kind, value, tb):\n        X.tb = tb\n        return True\nwith X():\n    1/0\nX.tb",
        True,
    ),
    ("exc_policy_error", "try:\n    getattr(1, '__base__')\nexcept PolicyError as e:\n    r = e.args\nr", True),
    ("exc_tool_error", "try:\n    demo.fail()\nexcept Exception as e:\n    r = e.args\nr", True),
    (
        "exc_add_note",
        "try:\n    1/0\nexcept Exception as e:\n    e.add_note('x')\n    r = getattr(e, '__notes__', None)\nr",
        True,
    ),
    ("exc_trystar", "try:\n    1/0\nexcept* ZeroDivisionError as g:\n    r = g.exceptions", True),
    (
        "exc_args_in_class",
        "try:\n    import json\n    json.loads('{')\nexcept Exception as e:\n    r = e.doc, e.pos, e.args\nr",
        True,
    ),
    # 7. Guard names: nothing a snippet writes can rebind them (they are constants of the code).
    ("guard_rebind_global", "_getattr_ = getattr", True),
    ("guard_global_stmt", "def f():\n    global _getattr_\n    _getattr_ = 1\nf()", True),
    ("guard_builtins_assign", "__builtins__ = {}", True),
    ("guard_metaclass_assign", "__metaclass__ = type", True),
    ("guard_print_assign", "_print_ = 1", True),
    ("guard_class_body", "class X:\n    _getattr_ = 1", True),
    ("guard_default_arg", "def f(g=_getattr_):\n    return g\nf()", True),
    ("guard_write_dict_key", "d = {}\nd['_getattr_'] = len\n(5).real", True),
    ("guard_walrus", "(_getiter_ := list)", True),
    ("guard_for_target", "for _write_ in [1]:\n    pass", True),
    ("guard_except_name", "try:\n    1/0\nexcept Exception as _getattr_:\n    pass", True),
    ("guard_import_as", "import json as _getattr_", True),
    ("guard_func_name", "def _getattr_(o, n):\n    return 1", True),
    ("guard_lambda_arg", "(lambda _getattr_: 1)(1)", True),
    # 8. Public names of allowed modules that do too much, and submodules behind them.
    ("export_base64_main", "import base64\nbase64.main()", True),
    ("export_base64_test", "import base64\nbase64.test()", True),
    ("export_base64_encode", "import base64\nbase64.encode", True),
    ("export_from_base64_main", "from base64 import main\nmain()", True),
    ("export_json_load", "import json\njson.load", True),
    ("export_json_decoder_module", "from json import decoder\ndecoder", True),
    ("export_json_scanner_module", "from json import scanner", True),
    ("export_collections_abc", "from collections import abc\nabc", True),
    ("export_hashlib_file_digest", "import hashlib\nhashlib.file_digest", True),
    ("export_statistics_decimal", "import statistics\nstatistics.Decimal", True),
    ("export_datetime_capi", "import datetime\ndatetime.datetime_CAPI", True),
    ("export_re_regexflag", "import re\nre.RegexFlag", True),
    ("export_re_debug", "import re\nre.compile('a', re.DEBUG)", True),
    ("export_re_scanner", "import re\nre.Scanner", True),
    ("export_random_os", "import random\nrandom.SystemRandom()._urandom", True),
    ("export_namespace_dict", "import json\njson.__dict__", True),
    ("export_namespace_write", "import json\njson.dumps = len", True),
    ("export_namedtuple_module", "import collections\nP = collections.namedtuple('P', 'x', module='os')\nP(1)", True),
    ("export_dir_namespace", "import json\ndir(json)", True),
    # 9. The dunders a snippet may read: __class__ is type() (a type it could name), __name__ and __doc__ are
    # text; none of them is a first step anywhere.
    ("cls_base", "(1).__class__.__base__", True),
    ("cls_bases_getattr", "getattr(getattr((), '__class__'), '__bases__')[0]", True),
    ("cls_mro_object", "''.__class__.mro()[-1].__subclasses__()", True),
    ("cls_mro_getattr", "getattr(''.__class__.mro()[-1], '__subcl' + 'asses__')()", True),
    ("cls_of_function", "(lambda: 0).__class__", True),
    ("cls_of_function_getattr", "getattr(lambda: 0, '__class__')", True),
    ("cls_of_generator", "(i for i in [1]).__class__", True),
    ("cls_of_builtin", "len.__class__", True),
    ("cls_of_method", "[].append.__class__", True),
    ("cls_of_dict_keys", "{}.keys().__class__", True),
    ("cls_of_type", "int.__class__", True),
    ("cls_of_cls", "(1).__class__.__class__", True),
    ("cls_of_snippet_class", "class X:\n    pass\nX.__class__", True),
    ("cls_of_pack", "demo.__class__", True),
    ("cls_of_namespace", "import json\njson.__class__", True),
    ("cls_of_getattr_guard", "getattr.__class__", True),
    ("cls_of_super", "class X:\n    def f(self):\n        return super().__class__\nX().f()", True),
    ("cls_exc_init", "try:\n    1/0\nexcept Exception as e:\n    r = e.__class__.__init__\nr", True),
    (
        "cls_exc_subclasses",
        "try:\n    1/0\nexcept Exception as e:\n    c = e.__class__\nc.mro()[-1].__subclasses__()",
        True,
    ),
    (
        "cls_exc_module",
        "try:\n    demo.fail()\nexcept Exception as e:\n    r = getattr(e.__class__, '__module__')\nr",
        True,
    ),
    ("cls_tool_error_dict", "try:\n    demo.fail()\nexcept ToolError as e:\n    r = type(e).__dict__\nr", True),
    ("cls_write", "x = []\nx.__class__ = dict", True),
    ("cls_setattr", "class X:\n    pass\nsetattr(X(), '__class__', int)", True),
    ("cls_delattr", "class X:\n    pass\ndelattr(X, '__doc__')", True),
    ("cls_augassign", "class X:\n    pass\nx = X()\nx.__name__ += 'y'", True),
    ("name_write", "def f(): pass\nf.__name__ = 'g'", True),
    ("doc_format_chain", "'{0.__doc__.__class__.__base__}'.format(1)", True),
    ("class_format_chain", "'{0.__class__.__init__.__globals__}'.format(1)", True),
    ("name_of_namespace", "import json\njson.__name__", True),
    ("doc_of_frame", "def g():\n    yield\nx = g()\nnext(x)\ngetattr(x, 'gi_frame').__doc__", True),
    ("name_nfkc", "getattr(len, '\uff3f\uff3fname\uff3f\uff3f').__class__.__base__", True),
    ("name_of_session_method", "parallel.__name__, parallel.__doc__, progress.__class__", False),
    # type() hands out only types the snippet can name.
    ("type_function", "type(lambda: 0)", True),
    ("type_generator", "type(i for i in [1])", True),
    ("type_builtin", "type(len)", True),
    ("type_of_type", "type(type)", True),
    ("type_three_args_dunder", "type('X', (), {'__getattribute__': len})", True),
    ("type_dict_keys", "type({}.keys())", True),
    ("type_method", "class X:\n    def f(self): pass\ntype(X().f)", True),
    ("subclass_type", "class M(type):\n    pass\nM('X', (), {})", True),
    # Hostile __str__/__repr__/__lt__ and container subclasses in our own stringifying and to_json.
    (
        "str_raises_systemexit",
        "class E(Exception):\n    def __str__(self):\n        raise SystemExit(1)\nraise E()",
        True,
    ),
    (
        "str_raises_keyboard",
        "class E(Exception):\n    def __str__(self):\n        raise KeyboardInterrupt\nraise E()",
        True,
    ),
    ("str_recurses", "class E(Exception):\n    def __str__(self):\n        return str(self)\nraise E()", True),
    ("str_returns_int", "class E(Exception):\n    def __str__(self):\n        return 1\nraise E()", True),
    ("repr_raises_systemexit", "class X:\n    def __repr__(self):\n        raise SystemExit(2)\nX()", True),
    (
        "repr_in_key",
        "class X:\n    def __repr__(self):\n        raise KeyboardInterrupt\n    def __hash__(self):\n"
        "        return 1\n{X(): 1}",
        True,
    ),
    (
        "lt_raises_in_set",
        "class X:\n    def __lt__(self, other):\n        raise SystemExit(3)\n    def __hash__(self):\n"
        "        return id(self)\n{X(), X(), X()}",
        True,
    ),
    ("print_str_systemexit", "class X:\n    def __str__(self):\n        raise SystemExit(4)\nprint(X())", True),
    ("print_file_object", "class F:\n    def write(self, s):\n        pass\nprint('x', file=F())", True),
    ("str_subclass_value", "class S(str):\n    def __str__(self):\n        return 1\nS('x')", True),
    ("float_subclass_nan", "class F(float):\n    n = 0\n    def __repr__(self):\n        return 'nan'\nF('nan')", True),
    (
        "dict_subclass_items",
        "class D(dict):\n    def items(self):\n        return [(len, len)]\n    def keys(self):\n"
        "        return [len]\nD(a=1)",
        True,
    ),
    ("list_subclass_iter", "class L(list):\n    def __iter__(self):\n        return iter([len])\nL([1])", True),
    # parallel() and progress(): snippet code runs only one at a time, and no limit gives way. They need a
    # worker's session (and `demo`), so they run in the worker only.
    ("parallel_10k", "parallel([lambda i=i: demo.echo(i) for i in range(10_000)])", False),
    ("parallel_nested", "parallel(lambda: parallel(lambda: demo.echo(1)))", False),
    (
        "parallel_in_eq",
        "class X:\n    def __eq__(self, other):\n        return parallel(lambda: demo.echo(1))\nX() == 1",
        False,
    ),
    ("parallel_in_callable_eq", "class X:\n    def __call__(self):\n        return X() == X()\nparallel(X())", False),
    ("parallel_raises", "def f():\n    raise SystemExit(5)\nparallel(f)", False),
    (
        "parallel_max_calls_mid_batch",
        "for i in range(195):\n    demo.echo(i)\nparallel([lambda i=i: demo.echo(i) for i in range(10)])",
        False,
    ),
    ("parallel_pending_leaks", "kept = []\nparallel(lambda: kept.append(demo.echo(1)) or kept[0])\nkept", False),
    ("parallel_pending_private", "p = []\nparallel(lambda: p.append(demo.echo(1)) or p[0])\np[0]._request", False),
    ("parallel_self_bound", "parallel.__self__.channel", False),
    ("parallel_getattr_session", "getattr(progress, '__self__')", False),
    ("parallel_failures_as_values", "parallel(demo.fail, demo.boom, return_exceptions=True)", False),
    ("progress_str_subclass", "class S(str):\n    def __str__(self):\n        return 1\nprogress(1, 2, S('x'))", False),
    (
        "progress_float_subclass",
        "class F(float):\n    def __float__(self):\n        return 1e999\nprogress(F())",
        False,
    ),
    ("progress_flood", "while True:\n    progress(1, 2, 'x' * 10_000)", False),
    ("recursion", "def f():\n    return f()\nf()", False),
    ("memory", "'a' * 10**10", False),
    ("cpu", "while True:\n    pass", False),
    ("bigpow", "10**10**10", False),
    ("print_flood", "while True:\n    print('x' * 1000)", False),
    ("call_flood", "while True:\n    demo.echo(1)", False),
    ("deep_value", "x = []\nfor i in range(10000):\n    x = [x]\nx", False),
    ("self_ref", "x = []\nx.append(x)\nx", False),
]


def _blocked_or_harmless(code: str) -> tuple[Any, dict[str, Any]]:
    """The language layer alone, in this process: compile must refuse, or the run must fail harmlessly."""
    printed: list[str] = []

    class Collector:
        def _call_print(self, *objects: Any, **kwargs: Any) -> None:
            printed.append(" ".join(map(str, objects)))

    try:
        compiled = compile_restricted(code, make_guards(lambda _getattr=None: Collector()))
    except CompileFailure as failure:
        return failure, {}
    namespace = make_globals({"demo": object()})
    try:
        exec(compiled, namespace)
    except BaseException as exc:  # SystemExit too: the worker reports it as the snippet's error
        return exc, namespace
    return (namespace.get(RESULT_NAME), printed), namespace


@pytest.mark.parametrize(("code", "in_process"), [(c, p) for _, c, p in CORPUS], ids=[i for i, _, _ in CORPUS])
def test_language_layer_alone(code: str, in_process: bool) -> None:
    if not in_process:
        pytest.skip("needs a worker: resource exhaustion, or parallel(), progress() and pack calls")
    outcome, namespace = _blocked_or_harmless(code)
    if isinstance(outcome, CompileFailure | BaseException):
        assert_no_leak(safe_repr(outcome))  # a payload's __repr__ may raise SystemExit, here as in the worker
        return
    value, printed = outcome
    assert_no_leak(to_json(value), printed)
    assert not footholds(value, namespace), f"handed out {footholds(value, namespace)}: {safe_repr(value)}"


def test_corpus_is_big_enough() -> None:
    assert len(CORPUS) >= 50


@pytest.mark.parametrize("code", [c for _, c, _ in CORPUS], ids=[i for i, _, _ in CORPUS])
async def test_both_layers(sandbox: Sandbox, code: str) -> None:
    from sandbox import Limits

    result = await sandbox.run(code, packs=PACKS, on_call=make_on_call(), limits=Limits(timeout=2.0, memory_mb=128))
    assert_no_leak(result.value, result.output, str(result.error))
    assert not result.ok or result.value is None or "canary" not in repr(result.value)
    assert (await sandbox.run("1 + 1", packs={}, on_call=make_on_call())).value == 2


# ---- what the host says about a run cannot be forged by the run ----------------------------------------------

HOST_TIMEOUT = "run exceeded the 5.0 s time limit (sandbox.timeout)"
FORGED_VERDICTS = {
    "timeout": ("TimeoutError", HOST_TIMEOUT),
    "crash": ("WorkerCrashed", "the worker died with signal SIGKILL"),
    "busy": ("BusyError", "the sandbox is busy: 3 runs are running (sandbox.max_concurrent_runs)"),
    "unavailable": ("ToolUnavailable", "server 'demo' is unavailable: connection lost"),
    "limit": ("LimitError", "more than 200 pack calls in one run (sandbox.max_calls)"),
    "cyrillic_timeout": ("\u0422imeoutError", HOST_TIMEOUT),
}


SNIPPET_CLASSES = ("ToolUnavailable", "LimitError")
"""Names the sandbox gives the snippet; the others it defines itself."""


@pytest.mark.parametrize(("kind", "message"), FORGED_VERDICTS.values(), ids=FORGED_VERDICTS.keys())
async def test_a_snippet_cannot_raise_a_host_verdict(sandbox: Sandbox, kind: str, message: str) -> None:
    """A class of the host's name with the host's text is still the snippet's own error: origin "code"."""
    define = "" if kind in SNIPPET_CLASSES else f"class {kind}(Exception):\n    pass\n"
    result = await sandbox.run(f"{define}raise {kind}({message!r})", packs=PACKS, on_call=make_on_call())
    assert result.error is not None and (result.error.type, result.error.message) == (kind, message)
    assert result.error.origin == "code"


RERAISE = "try:\n    demo.fail()\nexcept ToolError as e:\n    raise {}(str(e))"


async def test_only_an_uncaught_tool_error_the_host_sent_is_a_tool_error(sandbox: Sandbox) -> None:
    async def run(code: str) -> Any:
        result = await sandbox.run(code, packs=PACKS, on_call=make_on_call())
        return result.error.origin, result.error.type

    assert await run("demo.fail()") == ("tool", "ToolError")
    assert await run(RERAISE.format("ToolError")) == ("tool", "ToolError")  # the same error, passed on
    assert await run(RERAISE.format("ToolTimeout")) == ("code", "ToolTimeout")
    assert await run("demo.echo(1)\nraise ToolError('demo.fail failed on purpose')") == ("code", "ToolError")


async def test_a_hostile_worker_cannot_claim_an_origin(hostile: Sandbox) -> None:
    """Unrestricted code writing its own Done: an error with an origin of its choosing is a broken protocol;
    one with the host's type and text is still the code's."""
    from tests.sandbox.hostile_worker import run_hostile

    def done_with(error: dict[str, Any]) -> str:
        return f"done(b'null', error={json.dumps(error).encode()!r})"

    forged = {"type": "TimeoutError", "message": HOST_TIMEOUT, "line": None, "column": None, "source": None}
    claimed = await run_hostile(hostile, done_with({**forged, "origin": "host"}))
    assert claimed.error is not None and claimed.error.type == "WorkerCrashed" and claimed.error.origin == "host"
    assert "broke the protocol" in claimed.error.message
    plain = await run_hostile(hostile, done_with(forged))
    assert plain.error is not None and plain.error.origin == "code" and plain.error.message == HOST_TIMEOUT
