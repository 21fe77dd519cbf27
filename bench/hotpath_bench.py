"""The hot path: `run('1+1')` and a proxied call, beside their floor and beside OneTool 2.2.2, side by side.

Three MCP servers over stdio, each with its own copy of the fault fixture server (`echo`) as the upstream:

- the floor: the fixture itself, called directly by an mcp Client (a bare Python MCP tool call on the same SDK);
- this gateway: `run('1+1')`, then one and ten pack calls to that tool;
- OneTool 2.2.2 (PyPI's `onetool-mcp`; PyPI's `onetool` is an unrelated package), installed by this bench in a
  venv of its own, never as a dependency, with the same upstream: `run('1+1')` and one proxied call. It runs
  snippets in its own process, with no isolation.

Wall time: every figure is the best median of ROUNDS rounds, the three servers taking turns within each round
(in the opposite order in the next), back to back and spaced like an agent's runs. Counts, which a noisy
machine does not blur: CPU and minor page faults per run of each process, back to back (the gateway itself;
the sandbox, that is its fork-servers with every worker they reaped; the upstream). Memory: the gateway's RSS
after all those runs beside the floor of importing the libraries it is built on.
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

from bench import Row, ms
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
OLD_VENV = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "onetool-bench" / "onetool-mcp-2.2.2"
"""Made by the first bench that needs it and kept: installing takes a minute."""
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
            async with _OldClient(old_onetool, old_params) as old:
                if old is not None:
                    servers.append(old)
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
    rows += _rows(servers, missing)
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
        return _Server("2.2.2", _child_of(os.getpid(), b"onetool-mcp-2.2.2"), calls)

    async def __aexit__(self, *exc: object) -> None:
        if self._client is not None:
            await self._client.__aexit__(*exc)


def _rows(servers: list[_Server], missing: str) -> list[Row]:
    floor, gateway = servers[0], servers[1]
    old = servers[2] if len(servers) > 2 else None
    rows: list[Row] = []
    if old is None:
        rows.append(Row("hot path", f"OneTool 2.2.2 ({OLD_RELEASE}): NOT MEASURED, could not install it", missing))
    for mode in ("back to back", "spaced"):
        bare = floor.best["call", mode]
        base, one = gateway.best["1+1", mode], gateway.best["call", mode]
        ten = gateway.best["ten calls", mode]
        rows.append(Row("hot path", f"floor: a bare Python MCP tool call over stdio, {mode}", ms(bare)))
        rows.append(
            Row("hot path", f"run('1+1') end to end, {mode}: OneTool / 2.2.2", _beside(base, old, "1+1", mode), "0.5x")
        )
        rows.append(Row("hot path", f"run('1+1') over the floor, {mode}", _over(base - bare, 1.5), "<= +1.5 ms"))
        rows.append(
            Row(
                "hot path",
                f"a proxied call's overhead over the direct call, {mode}: OneTool / 2.2.2",
                _beside(one - bare, old, "call", mode, bare),
                "0.5x",
            )
        )
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
        if old is not None:
            usage = old.usage[label]["process tree"]
            rows.append(
                Row(
                    "hot path",
                    "the same on 2.2.2 (its process tree)",
                    f"{ms(usage.cpu / old.runs[label])} / {usage.faults / old.runs[label]:.0f}",
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


def _beside(ours: float, old: _Server | None, label: str, mode: str, minus: float = 0.0) -> str:
    if old is None:
        return f"{ms(ours)} / not measured"
    theirs = old.best[label, mode] - minus
    return f"{ms(ours)} / {ms(theirs)} ({ours / theirs:.2f}x)"


def _over(seconds: float, target_ms: float) -> str:
    return f"{seconds * 1000:+.3f} ms ({'met' if seconds * 1000 <= target_ms else 'missed'})"
