"""`onetool reload`: the running gateway of this config re-reads its file and applies what changed."""

from __future__ import annotations

import argparse
import sys

from onetool.cli._common import EXIT_FAILED, EXIT_OK, attach_failed, locate, print_json


def cmd_reload(args: argparse.Namespace) -> int:
    from onetool.config.reload import Reloaded
    from onetool.errors import AttachError, NotRunning

    try:
        target = locate(args)
        if target is None:
            raise NotRunning("no gateway is running for this config: `onetool serve` reads the file when it starts")
        done = target.request("POST", "/admin/reload")
    except NotRunning as e:
        print(f"onetool reload: {e}", file=sys.stderr)
        return EXIT_FAILED
    except AttachError as e:
        return attach_failed("reload", e)
    if args.json:
        print_json(done)
    else:
        print(f"reloaded the gateway at {target.origin}: {Reloaded(**done).summary()}")
    return EXIT_OK
