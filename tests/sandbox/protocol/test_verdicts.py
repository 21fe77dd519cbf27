"""The host's verdicts: declared once, with the type strings clients have always seen, and made nowhere else."""

from __future__ import annotations

import ast
from pathlib import Path

from sandbox import RunError, Verdict

SANDBOX = Path(__file__).resolve().parents[3] / "sandbox"


def test_the_verdicts_keep_the_type_strings_clients_see() -> None:
    assert {verdict.name: verdict.value for verdict in Verdict} == {
        "BUSY": "BusyError",
        "TIMEOUT": "TimeoutError",
        "LIMIT": "LimitError",
        "CRASHED": "WorkerCrashed",
        "INTERNAL": "InternalError",
    }


def test_a_verdicts_error_is_the_hosts_with_a_plain_string_type() -> None:
    error = Verdict.TIMEOUT.error("run exceeded the 1.0 s time limit (sandbox.timeout)")
    assert error == RunError("TimeoutError", "run exceeded the 1.0 s time limit (sandbox.timeout)", origin="host")
    assert type(error.type) is str
    assert str(error) == "TimeoutError: run exceeded the 1.0 s time limit (sandbox.timeout)"


def test_no_module_of_the_sandbox_makes_a_host_error_but_through_a_verdict() -> None:
    makers = []
    for path in SANDBOX.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id == "RunError"
                and any(
                    k.arg == "origin" and not (isinstance(k.value, ast.Constant) and k.value.value != "host")
                    for k in node.keywords
                )
            ):
                makers.append(str(path.relative_to(SANDBOX)))
    assert makers == ["protocol/verdicts.py"]  # Verdict.error, the one maker
