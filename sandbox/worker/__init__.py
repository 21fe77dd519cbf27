"""The worker side: what runs outside the gateway, in the fork-server (the zygote) and the confined workers it
forks. The host starts the fork-server by module path (`sandbox.worker.zygote`, named in the bootstrap of
sandbox/host/forkserver.py), in a process that never executes `sandbox/__init__`: nothing here imports anyio
or the host side, only sandbox/protocol/ and this package. This file imports nothing.

- `zygote`: the fork-server's main: imports everything a worker needs once, then forks a worker per request.
- `confine`: the OS layer, the security boundary around a worker (namespaces, empty root, rlimits, Landlock,
  seccomp).
- `_process`: one worker's life: confine itself, say ready, take one job, run it, report.
- `_fd_channel`: the worker's blocking end of its channel to the host.
- `_runtime`: run one snippet and describe how it ended, as JSON data.
- `_session`: the pack-call client a snippet talks through (pack stubs, parallel(), progress()).
- `_call_sites`: the pack calls a snippet's source shows, found here so the host never parses snippet code.
- `policy`: the language layer at compile time (RestrictedPython's transformer, ALLOWED_MODULES).
- `_guards`: the language layer at run time: the guards and the builtins a snippet executes with.
- `_exports`, `_modules`: the allowed modules, as read-only namespaces of allowed names.
- `_formatting`: `str.format` whose fields read attributes through the guard.
- `_record`: a JSON object from a pack call, whose keys also read as attributes.
- `_jsonable`: any snippet value as JSON data, the only kind of data that leaves the worker.
"""
