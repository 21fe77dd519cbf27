"""What the language layer's narrowing (format, exceptions, exports, type(), classes) must leave working."""

from __future__ import annotations

from typing import Any

import pytest

from sandbox import Sandbox
from tests.sandbox.conftest import PACKS, make_on_call

pytestmark = pytest.mark.anyio

STILL_WORKS = [
    ("'{} {name}'.format(1, name=2)", "1 2"),
    ("'{x[a]}'.format(x={'a': 1})", "1"),
    ("'{0[0]}-{0[1]}'.format([1, 2])", "1-2"),
    ("'{:.2f}|{:>5}|{!r}'.format(3.14159, 'a', 'b')", "3.14|    a|'b'"),
    ("'{0.real}/{0.imag}'.format(3)", "3/0"),
    ("str.format('{} {}', 1, 2), '{a}'.format_map({'a': 3})", ["1 2", "3"]),
    ("class S(str):\n    pass\nS('{}!').format(1)", "1!"),
    ("import collections\ncollections.Counter('abca').most_common(1)", [["a", 2]]),
    ("from collections import defaultdict, OrderedDict, deque, namedtuple\nP = namedtuple('P', 'x y')\nP(1, 2).y", 2),
    ("import collections\nclass D(collections.UserDict):\n    pass\nd = D(a=1)\nd['b'] = 2\ndict(d)", {"a": 1, "b": 2}),
    ("import datetime\ndatetime.datetime.strptime('2020-01-02', '%Y-%m-%d').day", 2),
    ("import json\njson.dumps({'a': [1, None]}, sort_keys=True)", '{"a": [1, null]}'),
    (
        "import json\nclass E(json.JSONEncoder):\n    def default(self, o):\n        return sorted(o)\n"
        "json.dumps({'a': {2, 1}}, cls=E)",
        '{"a": [1, 2]}',
    ),
    ("import json\njson.JSONDecoder().raw_decode('[1] tail')", [[1], 3]),
    ("import json\ntry:\n    json.loads('{')\nexcept json.JSONDecodeError as e:\n    r = e.pos\nr", 1),
    ("import re\nre.findall(r'\\d+', 'a12b3'), re.sub('a', 'b', 'aa', flags=re.I)", [["12", "3"], "bb"]),
    ("import statistics\nstatistics.mean([1, 2, 3]), statistics.median([3, 1, 2])", [2, 2]),
    ("import textwrap\ntextwrap.dedent('  a\\n  b')", "a\nb"),
    ("import base64\nbase64.b64encode(b'hi').decode(), base64.b64decode('aGk=')", ["aGk=", "b'hi'"]),
    ("import hashlib\nhashlib.sha256(b'x').hexdigest()[:8]", "2d711642"),
    ("import random\n1 <= random.SystemRandom().randint(1, 6) <= 6", True),
    ("import math, itertools\nmath.isqrt(17), list(itertools.pairwise([1, 2, 3]))", [4, [[1, 2], [2, 3]]]),
    ("type(1) is int, isinstance('a', (str, type(None))), isinstance(int, type)", [True, True, True]),
    ("try:\n    [][1]\nexcept IndexError as e:\n    r = e.args[0]\nr", "list index out of range"),
    (
        "class E(Exception):\n    def __init__(self, code):\n        super().__init__(f'code {code}')\n"
        "        self.code = code\ntry:\n    raise E({'n': 1})\nexcept E as e:\n    r = [e.code, str(e)]\nr",
        [{"n": 1}, "code {'n': 1}"],
    ),
    (
        "class Quiet:\n    def __enter__(self):\n        return 'in'\n    def __exit__(self, kind, value, tb):\n"
        "        return kind is KeyError\nwith Quiet() as q:\n    {}['x']\nq",
        "in",
    ),
    ("def gen():\n    yield 1\n    return 2\nlist(gen())", [1]),
]


@pytest.mark.parametrize(("code", "expected"), STILL_WORKS, ids=[c for c, _ in STILL_WORKS])
async def test_still_works(sandbox: Sandbox, code: str, expected: Any) -> None:
    result = await sandbox.run(code, packs=PACKS, on_call=make_on_call())
    assert result.error is None, str(result.error)
    assert result.value == expected


RECORDS = [
    # demo.echo returns {"args": [...], "kwargs": {...}}: its JSON objects read by key or by attribute.
    (
        "r = demo.echo(site={'name': 'Shop', 'owner': {'id': 7}})\nr.kwargs.site.name, r.kwargs.site.owner.id",
        ["Shop", 7],
    ),
    ("r = demo.echo(x=1)\nisinstance(r, dict), r['kwargs']['x'], r.kwargs.x, dict(r.kwargs)", [True, 1, 1, {"x": 1}]),
    ("r = demo.echo(items=2)\nr.kwargs.items == 2, callable(r.kwargs.items)", [False, True]),
    ("import json\njson.dumps(demo.echo(a=1).kwargs, sort_keys=True)", '{"a": 1}'),
    ("[s.n for s in demo.echo(sites=[{'n': 1}, {'n': 2}]).kwargs.sites]", [1, 2]),
    ("demo.echo(x=1).kwargs", {"x": 1}),
    ("r = demo.echo(x=1).kwargs\nr.y = 2", "AttributeError"),  # read-only
    ("demo.echo(**{'a b': 1}).kwargs.get('a b')", 1),
]


@pytest.mark.parametrize(("code", "expected"), RECORDS)
async def test_json_objects_from_pack_calls_read_keys_as_attributes(sandbox: Sandbox, code: str, expected: Any) -> None:
    result = await sandbox.run(code, packs=PACKS, on_call=make_on_call())
    if isinstance(expected, str) and expected.endswith("Error"):
        assert result.error is not None and result.error.type == expected, result
        return
    assert result.ok, result.error
    assert result.value == expected


async def test_a_missing_key_says_which_keys_there_are(sandbox: Sandbox) -> None:
    result = await sandbox.run("demo.echo(name=1).kwargs.title", packs=PACKS, on_call=make_on_call())
    assert result.error is not None and result.error.type == "AttributeError"
    assert "no key 'title' (its keys: name)" in result.error.message
    plain = await sandbox.run("{'a': 1}.a", packs=PACKS, on_call=make_on_call())
    assert plain.error is not None and "a dict's keys read as d['a']" in plain.error.message
