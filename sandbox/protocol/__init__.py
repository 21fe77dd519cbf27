"""What both sides of the process boundary speak: the host (the gateway process, sandbox/host/) and the
fork-server and its workers (sandbox/worker/) import these modules alike.

- `api`: the data that crosses the sandbox's public boundary: Limits in; RunResult, RunError and its Origin out.
- `errors`: the exceptions a snippet can see and catch, named in the host's replies (TOOL_ERRORS).
- `channel`: length-prefixed JSON frames, one framing for both ends of a worker's channel.
- `messages`: the messages of one run, typed; what a worker sends is checked there once, where it arrives.
- `sites`: the shape and bounds of the `sites` frame a worker sends before its snippet starts.
- `verdicts`: every kind of error the host itself decides (`Verdict`), declared once.

Workers import this package too, in a fork-server that never executes `sandbox/__init__`: nothing here may
import anyio, the host side or anything else a worker has no use for, and this file imports nothing.
"""
