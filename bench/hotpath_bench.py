"""The hot path: `run('1+1')` and a proxied call, beside their floor and beside OneTool 2.2.2, side by side.

Three MCP servers over stdio, each with its own copy of the fault fixture server (`echo`) as the upstream:

- the floor: the fixture itself, called directly by an mcp Client (a bare Python MCP tool call on the same SDK);
- this gateway: `run('1+1')`, then one and ten pack calls to that tool;
- OneTool 2.2.2 (PyPI's `onetool-mcp`; PyPI's `onetool` is an unrelated package), installed by this bench in a
  venv of its own, never as a dependency, with the same upstream: `run('1+1')` and one proxied call. It runs
  snippets in its own process, with no isolation.
- FastMCP 4.2.3's CodeMode (`fastmcp[code-mode]`: a proxy of the same upstream, one upstream session kept, with
  its CodeMode transform), the other Python code-mode gateway a user would consider, in a venv of its own
  (bench/codemode.py): the same `1+1` and one proxied call, as its `execute` tool's async snippets. It runs them
  in pydantic-monty, a Python subset interpreted in its own process.

Wall time: every figure is the best median of ROUNDS rounds, the servers taking turns within each round
(in the opposite order in the next), back to back and spaced like an agent's runs. Counts, which a noisy
machine does not blur: CPU and minor page faults per run of each process, back to back (the gateway itself;
the sandbox, that is its fork-servers with every worker they reaped; the upstream). Memory: the gateway's RSS
after all those runs beside the floor of importing the libraries it is built on, and every process each code-mode
gateway started but its upstream, beside FastMCP's (RSS, which counts a page once in each process that maps it,
and PSS, which shares it out among them: the sum of PSS is what the tree costs the machine).
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import yaml
from mcp import Client, StdioServerParameters

from bench import CACHE, Row, codemode, ms
from bench.gateway_bench import _DEPENDENCIES, ONETOOL, ROOT, _imports_rss_kb, _rss_kb

FAULT_SERVER = ROOT / "tests/fixtures/fault_server.py"
PYTHON = str(Path(ONETOOL).with_name("python"))
SPACED_GAP = 0.25
BACK_TO_BACK = 300
SPACED = 40
ROUNDS = 2

ONE_CALL = "fx.echo(message='x')"
TEN_CALLS = "[fx.echo(message=str(i)) for i in range(10)]"

OLD_RELEASE = "onetool-mcp==2.2.2"
OLD_VENV = CACHE / "onetool-mcp-2.2.2"
_TICK = 1 / os.sysconf("SC_CLK_TCK")


def _install_old_release() -> tuple[Path | None, str]:
    """OneTool 2.2.2's `onetool`, in a venv of its own; else None and why."""
    executable = OLD_VENV / "bin" / "onetool"
    if executable.exists():
        return executable, ""
    shutil.rmtree(OLD_VENV, ignore_errors=True)
    subprocess.run([sys.executable, "-m", "venv", str(OLD_VENV)], check=True, capture_output=True)
    # 2.2.2 declares Python >= 3.12; its run tool and its proxying work on 3.11, which is all we measure.
    pip = [str(OLD_VENV / "bin" / "pip"), "install", "-q", "--ignore-requires-python", OLD_RELEASE]
    done = subprocess.run(pip, capture_output=True, text=True)
    if done.returncode != 0 or not executable.exists():
        shutil.rmtree(OLD_VENV, ignore_errors=True)
        errors = [line for line in done.stderr.splitlines() if line.startswith("ERROR")]
        return None, (errors or ["pip failed"])[-1]
    return executable, ""


def _stat(pid: int) -> list[int]:
    """The fields of /proc/PID/stat after the command name (index 0 is the state)."""
    return [
        int(f) if f.lstrip("-").isdigit() else 0
        for f in Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ]


def _children() -> dict[int, list[int]]:
    tree: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                tree.setdefault(_stat(int(entry))[1], []).append(int(entry))
            except OSError:
                continue
    return tree


@dataclass
class _Usage:
    """CPU seconds and minor page faults, of a process alone and of what it reaped."""

    cpu: float = 0.0
    faults: int = 0

    def __add__(self, other: _Usage) -> _Usage:
        return _Usage(self.cpu + other.cpu, self.faults + other.faults)

    def __sub__(self, other: _Usage) -> _Usage:
        return _Usage(self.cpu - other.cpu, self.faults - other.faults)


def _own(pid: int) -> _Usage:
    fields = _stat(pid)  # minflt 7, utime 11, stime 12
    return _Usage((fields[11] + fields[12]) * _TICK, fields[7])


def _reaped(pid: int) -> _Usage:
    fields = _stat(pid)  # cminflt 8, cutime 13, cstime 14
    return _Usage((fields[13] + fields[14]) * _TICK, fields[8])


def _tree(pid: int, children: dict[int, list[int]]) -> _Usage:
    """A process, every live descendant, and all they reaped."""
    total, stack = _Usage(), [pid]
    while stack:
        current = stack.pop()
        try:
            total = total + _own(current) + _reaped(current)
        except OSError:
            continue
        stack.extend(children.get(current, []))
    return total


def _gateway_parts(gateway: int) -> dict[str, _Usage]:
    """The gateway alone; its sandbox (live fork-servers with their workers, and the fork-servers it reaped);
    its upstream."""
    children = _children()
    parts = {"gateway": _own(gateway), "sandbox": _reaped(gateway), "upstream": _Usage()}
    for child in children.get(gateway, []):
        try:
            command = Path(f"/proc/{child}/cmdline").read_bytes()
        except OSError:
            continue
        part = "sandbox" if b"sandbox.worker.zygote" in command else "upstream"
        parts[part] = parts[part] + _tree(child, children)
    return parts


def _child_of(parent: int, marker: bytes) -> int:
    for child in _children().get(parent, []):
        try:
            if marker in Path(f"/proc/{child}/cmdline").read_bytes():
                return child
        except OSError:
            continue
    raise RuntimeError(f"no child process with {marker!r}")


async def _samples(call: Callable[[], Awaitable[object]], n: int, gap: float) -> list[float]:
    out = []
    for _ in range(n):
        if gap:
            await anyio.sleep(gap)
        start = time.perf_counter()
        await call()
        out.append(time.perf_counter() - start)
    return out


@dataclass
class _Server:
    """One of the three servers: its calls by label, and the best median of each (label, mode) so far."""

    name: str
    pid: int
    calls: dict[str, Callable[[], Awaitable[Any]]]
    best: dict[tuple[str, str], float] = field(default_factory=dict)
    usage: dict[str, dict[str, _Usage]] = field(default_factory=dict)
    """Per label, what its back-to-back runs cost each process, summed over the rounds."""
    runs: dict[str, int] = field(default_factory=dict)

    async def measure(self, label: str, mode: str, split: Callable[[int], dict[str, _Usage]]) -> None:
        call = self.calls[label]
        if mode == "spaced":
            samples = await _samples(call, SPACED, SPACED_GAP)
        else:
            before = split(self.pid)
            samples = await _samples(call, BACK_TO_BACK, 0)
            after = split(self.pid)
            spent = self.usage.setdefault(label, {})
            for part in after:
                spent[part] = spent.get(part, _Usage()) + (after[part] - before.get(part, _Usage()))
            self.runs[label] = self.runs.get(label, 0) + BACK_TO_BACK
        median = statistics.median(samples)
        self.best[label, mode] = min(median, self.best.get((label, mode), median))


def _whole(pid: int) -> dict[str, _Usage]:
    return {"process tree": _tree(pid, _children())}


def _fixture() -> StdioServerParameters:
    return StdioServerParameters(command=PYTHON, args=[str(FAULT_SERVER), "ok"])


async def _until_connected(call: Callable[[], Awaitable[Any]], failed: Callable[[Any], bool]) -> None:
    """Servers connect their upstreams in the background: wait until a proxied call goes through."""
    with anyio.fail_after(60):
        while failed(await call()):
            await anyio.sleep(0.2)


def _text(result: Any) -> str:
    return " ".join(getattr(part, "text", "") for part in result.content)


async def run() -> list[Row]:
    rows: list[Row] = []
    old_onetool, missing = _install_old_release()
    codemode_python, codemode_missing = codemode.install()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        config = folder / "onetool.yaml"
        config.write_text(yaml.safe_dump({"servers": {"fx": {"command": PYTHON, "args": [str(FAULT_SERVER), "ok"]}}}))
        (folder / "old").mkdir()
        old_config = folder / "old" / "onetool.yaml"
        fx = {"type": "stdio", "command": PYTHON, "args": [str(FAULT_SERVER), "ok"]}
        old_config.write_text(yaml.safe_dump({"servers": {"fx": fx}, "telemetry": {"enabled": False}}))
        gateway_params = StdioServerParameters(
            command=ONETOOL, args=["serve", "--config", str(config), "--log-level", "WARNING"]
        )
        # 2.2.2 keeps logs, stats and telemetry ids beside its config and in the home folder: both in `tmp`.
        old_params = StdioServerParameters(
            command=str(old_onetool),
            args=["--config", str(old_config)],
            cwd=str(folder / "old"),
            env={"HOME": str(folder / "old"), "PATH": os.environ.get("PATH", "")},
        )
        async with Client(_fixture(), mode="legacy") as bare, Client(gateway_params, mode="legacy") as gateway:
            servers = [
                _Server(
                    "floor",
                    _child_of(os.getpid(), b"fault_server"),
                    {"call": lambda: bare.call_tool("echo", {"message": "x"})},
                ),
                _Server(
                    "OneTool",
                    _child_of(os.getpid(), b"\x00serve\x00"),
                    {
                        label: (lambda code=code: gateway.call_tool("run", {"code": code}))
                        for label, code in (("1+1", "1+1"), ("call", ONE_CALL), ("ten calls", TEN_CALLS))
                    },
                ),
            ]
            await _until_connected(servers[1].calls["call"], lambda result: result.is_error)
            upstream = [PYTHON, str(FAULT_SERVER), "ok"]
            async with (
                _OldClient(old_onetool, old_params) as old,
                _CodeModeClient(codemode_python, upstream) as fastmcp,
            ):
                servers += [server for server in (old, fastmcp) if server is not None]
                for server in servers:
                    for call in server.calls.values():
                        await _samples(call, 20, 0)
                for round_ in range(ROUNDS):
                    for mode in ("back to back", "spaced"):
                        for server in servers if round_ % 2 == 0 else servers[::-1]:
                            split = _gateway_parts if server.name == "OneTool" else _whole
                            for label in server.calls:
                                await server.measure(label, mode, split)
                rss = _rss_kb(servers[1].pid)
                memory = {server.name: _footprint(server.pid) for server in servers[1:]}
    rows += _rows(servers, missing, codemode_missing)
    rows += _memory_rows(memory)
    floor_rss = _imports_rss_kb(_DEPENDENCIES)
    rows.append(
        Row(
            "hot path",
            f"gateway RSS after {sum(servers[1].runs.values()) + SPACED * ROUNDS * 3} runs, beside the import floor "
            f"({_DEPENDENCIES})",
            f"{rss / 1024:.1f} MiB vs {floor_rss / 1024:.1f} MiB ({(rss - floor_rss) / 1024:+.1f})",
        )
    )
    return rows


class _OldClient:
    """A client of OneTool 2.2.2 once its upstream is connected, as a _Server; None if it is not installed."""

    def __init__(self, executable: Path | None, params: StdioServerParameters) -> None:
        self._client = Client(params, mode="legacy") if executable is not None else None

    async def __aenter__(self) -> _Server | None:
        if self._client is None:
            return None
        client = await self._client.__aenter__()
        tools = await client.list_tools()
        (run_tool,) = (tool for tool in tools.tools if tool.name == "run")
        argument = "command" if "command" in json.dumps(run_tool.input_schema) else "code"

        def calling(code: str) -> Callable[[], Awaitable[Any]]:
            return lambda: client.call_tool("run", {argument: code})

        calls = {"1+1": calling("1+1"), "call": calling(ONE_CALL)}
        await _until_connected(calls["call"], lambda result: "echo: x" not in _text(result))
        return _Server(OLD, _child_of(os.getpid(), b"onetool-mcp-2.2.2"), calls)

    async def __aexit__(self, *exc: object) -> None:
        if self._client is not None:
            await self._client.__aexit__(*exc)


class _CodeModeClient:
    """A client of FastMCP 4.2.3's CodeMode in front of ``upstream``, as a _Server; None if it is not installed."""

    def __init__(self, python: Path | None, upstream: list[str]) -> None:
        self._client = Client(codemode.stdio_server(python, upstream), mode="legacy") if python is not None else None

    async def __aenter__(self) -> _Server | None:
        if self._client is None:
            return None
        client = await self._client.__aenter__()

        def calling(code: str) -> Callable[[], Awaitable[Any]]:
            return lambda: client.call_tool("execute", {"code": code})

        calls = {"1+1": calling(codemode.ONE_PLUS_ONE), "call": calling(codemode.ONE_CALL)}
        await _until_connected(calls["call"], lambda result: "echo: x" not in _text(result))
        return _Server(CODEMODE, _child_of(os.getpid(), str(codemode.SERVER).encode()), calls)

    async def __aexit__(self, *exc: object) -> None:
        if self._client is not None:
            await self._client.__aexit__(*exc)


OLD, CODEMODE = "2.2.2", "FastMCP CodeMode"
_RIVALS = {
    OLD: ("0.5x", f"OneTool 2.2.2 ({OLD_RELEASE})"),
    CODEMODE: ("< 1x", f"FastMCP CodeMode ({codemode.RELEASE})"),
}
"""Each gateway OneTool is set beside: the target of OneTool's ratio to it, and what it is."""


def _rows(servers: list[_Server], missing: str, codemode_missing: str) -> list[Row]:
    floor, gateway = servers[0], servers[1]
    rivals = {server.name: server for server in servers[2:]}
    rows: list[Row] = []
    for name, why in ((OLD, missing), (CODEMODE, codemode_missing)):
        if name not in rivals:
            rows.append(Row("hot path", f"{_RIVALS[name][1]}: NOT MEASURED, could not install it", why))
    for mode in ("back to back", "spaced"):
        bare = floor.best["call", mode]
        base, one = gateway.best["1+1", mode], gateway.best["call", mode]
        ten = gateway.best["ten calls", mode]
        rows.append(Row("hot path", f"floor: a bare Python MCP tool call over stdio, {mode}", ms(bare)))
        for name, rival in rivals.items():
            target = _RIVALS[name][0]
            rows.append(
                Row(
                    "hot path",
                    f"run('1+1') end to end, {mode}: OneTool / {name}",
                    _beside(base, rival, "1+1", mode),
                    target,
                )
            )
            rows.append(
                Row(
                    "hot path",
                    f"a proxied call's overhead over the direct call, {mode}: OneTool / {name}",
                    _beside(one - bare, rival, "call", mode, bare),
                    target,
                )
            )
        rows.append(Row("hot path", f"run('1+1') over the floor, {mode}", _over(base - bare, 1.5), "<= +1.5 ms"))
        rows.append(
            Row(
                "hot path",
                f"one pack call inside a run over the floor, {mode}",
                _over(one - base - bare, 0.7),
                "<= +0.7 ms",
            )
        )
        rows.append(
            Row(
                "hot path",
                f"each of ten pack calls over the floor, {mode}",
                _over((ten - base) / 10 - bare, 0.7),
                "<= +0.7 ms",
            )
        )
    for label, what in (("1+1", "run('1+1')"), ("call", "a run with one pack call")):
        runs = gateway.runs[label]
        parts = gateway.usage[label]
        split = ", ".join(f"{part} {ms(usage.cpu / runs)} / {usage.faults / runs:.0f}" for part, usage in parts.items())
        rows.append(Row("hot path", f"{what}, back to back: CPU / page faults per run", split))
        for name, rival in rivals.items():
            usage = rival.usage[label]["process tree"]
            rows.append(
                Row(
                    "hot path",
                    f"the same on {name} (its process tree, its upstream included)",
                    f"{ms(usage.cpu / rival.runs[label])} / {usage.faults / rival.runs[label]:.0f}",
                )
            )
    usage = floor.usage["call"]["process tree"]
    rows.append(
        Row(
            "hot path",
            "floor: the bare server, CPU / page faults per call",
            f"{ms(usage.cpu / floor.runs['call'])} / {usage.faults / floor.runs['call']:.0f}",
        )
    )
    return rows


def _footprint(pid: int) -> tuple[int, int, int]:
    """Resident KiB of ``pid`` and every process it started but its upstream: RSS summed, PSS summed, processes."""
    children = _children()
    rss = pss = count = 0
    stack = [pid]
    while stack:
        current = stack.pop()
        try:
            if Path(f"/proc/{current}/cmdline").read_bytes().split(b"\0")[1:2] == [str(FAULT_SERVER).encode()]:
                continue  # the upstream itself (FastMCP's own command line names it too, as an argument)
            fields = {
                key: int(value.split()[0])
                for key, _, value in (
                    line.partition(":") for line in Path(f"/proc/{current}/smaps_rollup").read_text().splitlines()
                )
                if key in ("Rss", "Pss")
            }
        except OSError:
            continue
        rss, pss, count = rss + fields["Rss"], pss + fields["Pss"], count + 1
        stack.extend(children.get(current, []))
    return rss, pss, count


def _memory_rows(memory: dict[str, tuple[int, int, int]]) -> list[Row]:
    """Every code-mode gateway's processes (its upstream aside), after the same runs."""
    rows = []
    theirs = memory.get(CODEMODE)
    for name, (rss, pss, count) in memory.items():
        versus = f" ({pss / theirs[1]:.2f}x FastMCP's PSS)" if theirs is not None and name != CODEMODE else ""
        rows.append(
            Row(
                "hot path",
                f"memory of {name}'s {count} processes, its upstream aside: RSS / PSS summed",
                f"{rss / 1024:.1f} / {pss / 1024:.1f} MiB{versus}",
                "PSS <= FastMCP's" if name == "OneTool" else "",
            )
        )
    return rows


def _beside(ours: float, rival: _Server, label: str, mode: str, minus: float = 0.0) -> str:
    theirs = rival.best[label, mode] - minus
    return f"{ms(ours)} / {ms(theirs)} ({ours / theirs:.2f}x)"


def _over(seconds: float, target_ms: float) -> str:
    return f"{seconds * 1000:+.3f} ms ({'met' if seconds * 1000 <= target_ms else 'missed'})"
