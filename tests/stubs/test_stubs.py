"""The typed module of every pack (onetool.stubs): valid Python, clean under `mypy --strict`, useful for snippets.

The reference catalogue is the recorded tool lists of server-everything and mcp-server-time
(fixtures/reference_tools.json) plus the shipped and the test local packs; tests/serve/test_tools_module.py
checks the same against the live servers through `onetool serve --http`.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from mcp import types

from onetool.registry import Pack, Registry, Tool, load_local_packs
from onetool.registry._registry import upstream_tools
from onetool.stubs import parse_filter, select, tools_module
from onetool.stubs._module import SNIPPET_BUILTINS
from tests.catalogue import catalogue, upstream_tool
from tests.conftest import FIXTURES, TESTS
from tests.readme import readme_snippets

LOCAL_PACKS = TESTS / "fixtures" / "packs"


def type_check(folder: Path, module: str, snippet: str | None = None) -> list[str]:
    """Compile ``module`` as tools.py and run `mypy --strict` on it (and on ``snippet`` as snippet.py).

    The errors mypy reports, as ``file:line: message`` lines; a compile error fails the test.
    """
    (folder / "tools.py").write_text(module, encoding="utf-8")
    compiled = subprocess.run([sys.executable, "-m", "py_compile", "tools.py"], cwd=folder, capture_output=True)
    assert compiled.returncode == 0, compiled.stderr.decode()
    files = ["tools.py"]
    if snippet is not None:
        (folder / "snippet.py").write_text("from tools import *\n\n" + snippet, encoding="utf-8")
        files.append("snippet.py")
    checked = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-incremental", "--cache-dir", str(folder / ".mypy"), *files],
        cwd=folder,
        capture_output=True,
        text=True,
    )
    errors = [line for line in checked.stdout.splitlines() if ": error:" in line]
    assert checked.returncode == (1 if errors else 0), checked.stdout + checked.stderr
    return errors


def reference_registry() -> Registry:
    recorded = json.loads((FIXTURES / "reference_tools.json").read_text())
    packs = load_local_packs([LOCAL_PACKS])
    for server, listing in recorded.items():
        tools = [types.Tool.model_validate(t) for t in listing["tools"]]
        packs[server] = Pack(name=server, tools=upstream_tools(server, server, tools), server=server)
    return Registry(packs)


def classes_of(module: str) -> dict[str, list[str]]:
    """Each pack class with its method names (classes that are not TypedDicts)."""
    tree = ast.parse(module)
    return {
        node.name: [f.name for f in node.body if isinstance(f, ast.FunctionDef)]
        for node in tree.body
        if isinstance(node, ast.ClassDef) and not node.bases
    }


def test_reference_module_compiles_passes_mypy_strict_and_imports(tmp_path: Path) -> None:
    module = tools_module(reference_registry())
    assert type_check(tmp_path, module) == []
    assert module.startswith('"""') and "\nfrom __future__ import annotations\n" in module
    assert "\ntime: Time = Time()\n" in module and "\nproxy: Proxy = Proxy()\n" in module
    assert "def get_current_time(self, timezone: str) -> TimeResult:" in module
    assert "def get_sum(self, a: float, b: float) -> Any:" in module
    assert "messageType: Literal['error', 'success', 'debug'], includeImage: bool = False" in module
    # Local tools keep their Python signatures; the `ctx` parameter is the gateway's, not the snippet's.
    assert "def call(self, server: str, tool: str, arguments: dict[str, Any] | None = None) -> Any:" in module
    assert "def web_search(self, query: str, count: int = 3) -> list[dict[str, Any]]:" in module
    # mcp-server-time's two tools return the same TimeResult shape: one TypedDict, shared.
    assert module.count("class TimeResult(TypedDict):") == 1 and "source: TimeResult" in module
    assert tools_module(reference_registry()) == module
    namespace: dict[str, Any] = {}
    exec(compile(module, "tools.py", "exec"), namespace)
    assert namespace["__all__"] == ["brave", "broken_helper", "everything", "proxy", "time", *SNIPPET_BUILTINS]
    with pytest.raises(NotImplementedError, match="run tool"):
        namespace["time"].get_current_time(timezone="UTC")


def test_the_fifty_tool_catalogue_passes_mypy_strict(tmp_path: Path) -> None:
    """Notion-, GitHub- and Slack-shaped schemas: nested objects, arrays of objects, enums, optional fields."""
    module = tools_module(catalogue())
    assert type_check(tmp_path, module) == []
    assert len(classes_of(module)) == len(catalogue().packs)


def test_a_snippet_type_checks_against_the_module_and_mistakes_are_flagged(tmp_path: Path) -> None:
    snippet = """\
now: str = time.get_current_time(timezone="UTC")["datetime"]
weather = everything.get_structured_content(location="Chicago")
total = weather["temperature"] + weather["humidity"]
servers = [s["name"] for s in proxy.list_servers()]
time.get_current_time(tz="UTC")
everything.get_structured_content(location="Paris")
time.get_current_time(timezone="UTC")["date"]
brave.web_search("q", count="three")
"""
    errors = type_check(tmp_path, tools_module(reference_registry()), snippet)
    lines = {int(e.split(":")[1]) - 2: e for e in errors}  # the snippet starts after the import and a blank line
    assert sorted(lines) == [5, 6, 7, 8], errors
    assert 'Unexpected keyword argument "tz"' in lines[5]
    assert "Literal['New York', 'Chicago', 'Los Angeles']" in lines[6]
    assert 'TypedDict "TimeResult" has no key "date"' in lines[7]
    assert 'Argument "count" to "web_search"' in lines[8]


def test_the_run_tools_built_ins_type_check_as_the_readme_uses_them(tmp_path: Path) -> None:
    snippet = """\
zones = ["UTC", "Asia/Tokyo"]
try:
    times = parallel([lambda z=z: time.get_current_time(timezone=z) for z in zones], return_exceptions=True)
except ToolTimeout as e:
    times = [str(e), e.server or "", e.tool or "", e.origin]
except ToolError:
    times = []
for i, _ in enumerate(times):
    progress(i + 1, len(times), "zones")
servers = [s["name"] for s in proxy.list_servers()]
progress("half")
parallel(lambda: 1, return_exceptions="yes")
"""
    errors = type_check(tmp_path, tools_module(reference_registry()), snippet)
    lines = {int(e.split(":")[1]) - 2: e for e in errors}
    assert sorted(lines) == [11, 12], errors
    assert 'Argument 1 to "progress" has incompatible type "str"' in lines[11]
    assert 'Argument "return_exceptions" to "parallel" has incompatible type "str"' in lines[12]


def test_a_pack_named_like_a_built_in_shadows_it_as_in_a_snippet(tmp_path: Path) -> None:
    report = upstream_tool("progress", "report", {"type": "object", "properties": {}}, "Report.")
    registry = Registry({"progress": Pack(name="progress", tools={"report": report}, server="progress")})
    module = tools_module(registry)
    assert "def progress(" not in module and "\nprogress: Progress = Progress()\n" in module
    assert "def parallel(" in module
    assert type_check(tmp_path, module, "progress.report()\n") == []


def test_filters_select_servers_and_single_tools() -> None:
    registry = reference_registry()
    assert list(classes_of(tools_module(registry, ["time"]))) == ["Time"]
    assert classes_of(tools_module(registry, ["everything__echo", "time__convert_time"])) == {
        "Everything": ["echo"],
        "Time": ["convert_time"],
    }
    # An upstream name works as well as the snippet name; a whole pack wins over one of its tools.
    assert classes_of(tools_module(registry, ["everything__get-sum"])) == {"Everything": ["get_sum"]}
    assert len(classes_of(tools_module(registry, ["time__convert_time", "time"]))["Time"]) == 2
    # Unknown names are left out.
    assert classes_of(tools_module(registry, ["time__nope", "nosuch", "time"])) == {
        "Time": ["get_current_time", "convert_time"]
    }
    assert parse_filter("github, myserver__echo,,") == ["github", "myserver__echo"]
    assert parse_filter(" , ") is None and parse_filter(None) is None
    assert [p.name for p, _ in select(registry, None)] == list(registry.packs)


def test_pack_names_holding_double_underscores_still_split() -> None:
    schema = {"type": "object", "properties": {}}
    tools = {"a__b": upstream_tool("my__pack", "a__b", schema, ""), "c": upstream_tool("my__pack", "c", schema, "")}
    registry = Registry({"my__pack": Pack("my__pack", tools, server="my__pack")})
    assert [t.name for _, ts in select(registry, ["my__pack__a__b"]) for t in ts] == ["a__b"]


@pytest.mark.parametrize("names", [["nosuch", "time__nope"], None])
def test_nothing_selected_or_no_servers_gives_an_empty_valid_module(tmp_path: Path, names: list[str] | None) -> None:
    registry = reference_registry() if names else Registry({})
    module = tools_module(registry, names)
    assert classes_of(module) == {} and f"__all__: list[str] = {list(SNIPPET_BUILTINS)!r}" in module
    assert type_check(tmp_path, module, "x: int = 1\n") == []


EVIL = '"""; import os; os.system("touch pwned"); """ \\ \\" \\\\ \x00\x1b \ud800 é 日本 ends with a quote"'
STR: dict[str, Any] = {"type": "string"}
NODE: dict[str, Any] = {
    "$defs": {
        "Node": {
            "type": "object",
            "description": EVIL,
            "properties": {"name": STR, "children": {"type": "array", "items": {"$ref": "#/$defs/Node"}}},
            "required": ["name"],
        }
    },
    "type": "object",
    "properties": {"root": {"$ref": "#/$defs/Node"}},
    "required": ["root"],
}
ODD_KEYS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "from": STR,
        "my-key": {"type": "integer"},
        "clé\ud800": {"enum": ['a\'"""', "\\", 1, None, True]},
        "self": STR,
        "kwargs": STR,
    },
    "required": ["from"],
}
SHADOWS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "list": {"type": "array", "items": STR},
        "str": {"type": "object", "additionalProperties": {"type": "number"}},
        "Any": {"type": ["string", "null"]},
        "TypedDict": {"type": "object", "properties": {"str": STR, "x": {"anyOf": [STR, {"type": "integer"}]}}},
    },
}


def hostile_registry() -> Registry:
    def pack(name: str, server: str, *tools: Tool) -> Pack:
        return Pack(name, {t.name: t for t in tools}, server=server)

    def tool(pack: str, name: str, schema: dict[str, Any], out: dict[str, Any] | None = None) -> Tool:
        return upstream_tool(pack, name, schema, EVIL, out)

    envelope = {"type": "object", "properties": {"result": {"type": "array", "items": {"type": "integer"}}}}
    return Registry(
        {
            "class_": pack(
                "class_",
                'evil"""server\\',
                tool("class_", "list", SHADOWS, SHADOWS),
                tool("class_", "str", {"type": "object", "properties": {}}, envelope),
                tool("class_", "import_", ODD_KEYS),
                tool("class_", "tree", NODE, NODE),
                tool(
                    "class_",
                    "NotImplementedError",
                    {"type": "object", "properties": {"self": STR}, "additionalProperties": True},
                ),
            ),
            "annotations": pack("annotations", "annotations", tool("annotations", "Time", SHADOWS)),
            "Any": pack("Any", "Any", tool("Any", "TypedDict", ODD_KEYS)),
            "_hidden": pack("_hidden", "_hidden", tool("_hidden", "x", SHADOWS)),
        }
    )


def test_hostile_names_and_descriptions_give_a_valid_harmless_module(tmp_path: Path) -> None:
    module = tools_module(hostile_registry())
    snippet = """\
class_.tree(root={"name": "a", "children": [{"name": "b"}]})["root"]["children"]
ints: list[int] = class_.str()
annotations.Time(list=["a"], str={"k": 1.5}, Any=None)
"""
    assert type_check(tmp_path, module, snippet) == []
    module.encode("utf-8")  # no lone surrogate left raw
    tree = ast.parse(module)
    # Only the header imports; every other statement is a definition: nothing from upstream runs as code.
    imports = [ast.unparse(n) for n in tree.body if isinstance(n, ast.Import | ast.ImportFrom)]
    assert all(i.startswith(("from __future__ ", "from builtins ", "from typing ")) for i in imports), imports
    kinds = {type(n).__name__ for n in tree.body[1:]} - {"ImportFrom"}
    assert kinds <= {"AnnAssign", "ClassDef", "Assign", "FunctionDef"}, kinds
    functions = [n.name for n in tree.body if isinstance(n, ast.FunctionDef)]
    assert functions == ["parallel", "progress"], "only the run tool's built-ins are functions"
    calls = {ast.unparse(c.func) for c in ast.walk(tree) if isinstance(c, ast.Call)}
    allowed = ("TypedDict", "NotImplementedError", *classes_of(module))
    assert all(c.startswith(allowed) for c in calls), calls
    assert "_hidden" not in module
    namespace: dict[str, Any] = {}
    exec(compile(module, "tools.py", "exec"), namespace)
    assert not (tmp_path / "pwned").exists() and not Path("pwned").exists()
    docs = [ast.get_docstring(n) for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)]
    assert EVIL.replace("\ud800", "\ufffd") in docs  # a lone surrogate cannot be a class's __doc__


def test_local_annotations_are_rendered_and_unresolvable_ones_are_any(tmp_path: Path) -> None:
    (tmp_path / "packs").mkdir()
    (tmp_path / "packs" / "shapes.py").write_text(
        '''\
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING, Annotated, Literal, TypedDict

from pydantic import BaseModel, Field

if TYPE_CHECKING:
    from somewhere import Hidden


class Color(Enum):
    RED = "red"
    BLUE = "blue"


class Point(BaseModel):
    x: int
    y: int = 0


class Row(TypedDict):
    id: int
    tags: list[str]


@dataclass
class Box:
    size: float


def draw(p: Point, /, color: Color, *rest: int, mode: Literal["fill", "line"] = "fill", scale=2, **opts: str) -> Box:
    """Draw a point."""
    return Box(1.0)


def rows(limit: Annotated[int, Field(gt=0)] = None, ids: Sequence[int] | None = None) -> list[Row]:
    return []


def ghost(thing: Hidden, other: "NoSuchName" = 1) -> Hidden:
    return thing
''',
        encoding="utf-8",
    )
    module = tools_module(Registry(load_local_packs([tmp_path / "packs"])), ["shapes"])
    snippet = """\
box = shapes.draw({"x": 1}, "red", 1, 2, mode="line", opts="o")
size: float = box["size"]
first: list[str] = shapes.rows(limit=3)[0]["tags"]
shapes.draw({"x": 1}, "green")
"""
    errors = type_check(tmp_path, module, snippet)
    assert len(errors) == 1 and "snippet.py:6:" in errors[0] and "Literal['red', 'blue']" in errors[0], errors
    assert (
        "def draw(self, p: Point, /, color: Literal['red', 'blue'], *rest: int, mode: Literal['fill', 'line'] = 'fill',"
        " scale: Any = 2, **opts: str) -> Box:" in module
    )
    # `limit: int = None` would not type-check: the default is shown as `...`.
    assert "def rows(self, limit: int = ..., ids: list[int] | None = None) -> list[Row]:" in module
    assert "def ghost(self, thing: Any, other: Any = 1) -> Any:" in module


def test_huge_and_deep_schemas_are_bounded(tmp_path: Path) -> None:
    deep: dict[str, Any] = STR
    for _ in range(500):
        deep = {"type": "object", "properties": {"inner": deep}}
    wide = {
        "type": "object",
        "properties": {f"p{i}": {"type": "object", "properties": {"v": STR}} for i in range(5000)},
    }
    tools = {"deep": upstream_tool("big", "deep", deep, "", deep), "wide": upstream_tool("big", "wide", {}, "", wide)}
    module = tools_module(Registry({"big": Pack("big", tools, server="big")}))
    assert len(module) < 200_000
    assert type_check(tmp_path, module, "big.wide()['anything']\n") == []


def test_the_readmes_snippets_type_check_strictly_against_the_module(tmp_path: Path) -> None:
    snippets = readme_snippets()
    assert snippets, "the README's Writing snippets section has no ```python block"
    module = tools_module(reference_registry())
    for snippet in snippets:
        assert type_check(tmp_path, module, snippet) == [], snippet
