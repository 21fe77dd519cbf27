"""Imported by a test fork-server before `sandbox.worker.zygote.main()`: its workers run plain Python.

Production has no switch that turns the language layer off. To test the host against a worker whose
language layer was bypassed, a test starts its Sandbox with this fork-server instead (see
tests/sandbox/hostile_worker.py): the workers are the production ones, confined the same way, talking to
the real host over the real channel; only the job runs unrestricted, so it can write raw frames.
"""

from __future__ import annotations

import builtins
from collections.abc import Mapping
from typing import Any

from sandbox.worker import _process
from sandbox.worker._fd_channel import FdChannel
from sandbox.worker._jsonable import to_json
from sandbox.worker._runtime import describe
from sandbox.worker.policy import FILENAME, RESULT_NAME, capture_last_value, parse


def run_plain(job: Mapping[str, Any], channel: FdChannel) -> dict[str, Any]:
    lines = job["code"].splitlines()
    namespace: dict[str, Any] = {"__builtins__": builtins, "__name__": "__main__"}
    try:
        exec(compile(capture_last_value(parse(job["code"])), FILENAME, "exec"), namespace)
        return {"op": "done", "value": to_json(namespace.get(RESULT_NAME)), "output": "", "error": None}
    except BaseException as exc:
        return {"op": "done", "value": None, "output": "", "error": describe(exc, lines, job["limits"])}


_process.run_job = run_plain
