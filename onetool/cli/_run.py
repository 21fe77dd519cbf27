"""`onetool run`: a snippet on the running gateway when there is one, else on a gateway of its own."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from onetool.attach.admin import Target
    from onetool.config import Config

from onetool.cli._common import EXIT_USAGE, attach_failed, locate, print_result, setup
from onetool.cli._progress import ProgressLine
from onetool.errors import AttachError


def cmd_run(args: argparse.Namespace) -> int:
    code = _read_code(args)
    if code is None:
        return EXIT_USAGE
    if args.standalone and (args.gateway_url or args.token):
        print("onetool run: --standalone runs here, on no gateway: give it without --url and --token", file=sys.stderr)
        return EXIT_USAGE
    from onetool.errors import NotRunning, SeveralGateways

    try:
        target = None if args.standalone else locate(args)
        if target is not None:
            return print_result(_attached_run(target, code), as_json=args.json)
    except NotRunning:
        pass  # a stale discovery file: run here instead
    except SeveralGateways as e:
        if names_packs(code):
            print(f"onetool run: {e}; or run it here, with this folder's servers, with --standalone", file=sys.stderr)
            return EXIT_USAGE
        # It uses no pack: any gateway would answer the same, and so does a sandbox here.
    except AttachError as e:
        return attach_failed("run", e)
    import anyio

    # The snippet's own failure is the command's output (on stderr); logs would only repeat it. A missing config
    # matters only to a snippet that uses a pack.
    config = setup(args, "ERROR", say_no_config=names_packs(code))
    return anyio.run(_run, config, code, args.json)


def names_packs(code: str) -> bool:
    """Whether a snippet may use a pack: it reads a name that nothing in it binds (``bound_names``) and no builtin
    of a run is. One that cannot be parsed uses none: its SyntaxError is the same wherever it runs."""
    import ast
    import builtins

    from sandbox.protocol.api import RUN_FUNCTIONS
    from sandbox.protocol.errors import SNIPPET_ERRORS
    from sandbox.protocol.sites import bound_names

    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False
    read = {node.id for node in ast.walk(tree) if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load)}
    return bool(read - bound_names(tree) - set(dir(builtins)) - set(SNIPPET_ERRORS) - set(RUN_FUNCTIONS))


def _read_code(args: argparse.Namespace) -> str | None:
    if args.code is not None and args.file is not None:
        print("onetool run: give the code with -c CODE or as a FILE, not both", file=sys.stderr)
        return None
    if args.code is None and args.file is None:
        print("onetool run: give the code with -c CODE, or a FILE, or - for standard input", file=sys.stderr)
        return None
    if args.code is not None:
        return str(args.code)
    if args.file == "-":
        return sys.stdin.read()
    try:
        with open(args.file, encoding="utf-8") as f:
            return f.read()
    except OSError as e:
        print(f"onetool run: cannot read {args.file}: {e.strerror or e}", file=sys.stderr)
        return None


def _attached_run(target: Target, code: str) -> dict[str, Any]:
    """The run on the gateway at ``target``, its progress on a line of the terminal (if stderr is one)."""
    if not ProgressLine.wanted():
        return dict(target.request("POST", "/admin/run", {"code": code}))
    line = ProgressLine()
    try:
        for item in target.lines("POST", "/admin/run", {"code": code, "progress": True}):
            if "result" in item:
                return dict(item["result"])
            line.show(item["progress"], item["total"], item["message"])
    finally:
        line.clear()
    raise AttachError(f"the gateway at {target.origin} ended the run's answer before its result", 0)


async def _run(config: Config, code: str, as_json: bool) -> int:
    from onetool.core.gateway import Gateway
    from onetool.core.relay import ProgressClient

    line = ProgressLine()

    async def show(progress: float, total: float | None, message: str | None) -> None:
        line.show(progress, total, message)

    async with Gateway(config, warm_workers=1) as gateway:
        try:
            result = await gateway.run(code, ProgressClient(show) if ProgressLine.wanted() else None, face="cli")
        finally:
            line.clear()
    return print_result(result.model_dump(mode="json", by_alias=True, exclude_none=True), as_json=as_json)
