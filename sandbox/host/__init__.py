"""The host side: what runs in the gateway process, on its event loop (anyio). Everything a worker sends is
untrusted here, and nothing here runs snippet code.

- `pool`: `Sandbox`, the entry point: slots, warm workers, one fresh confined worker per run.
- `_run`: the host's half of one run: send the job, answer the worker's pack calls, read how the run ended.
- `_slots`: what a run holds: a worker slot for its whole life, a CPU slot only while its worker may compute.
- `budget`: the host's memory for run traffic, one budget across every run.
- `_untrusted`: decoding a frame a hostile worker sent into JSON data any writer accepts.
- `_socket_channel`: the host's non-blocking end of a worker's channel.
- `forkserver`: the client of the fork-server (sandbox/worker/zygote.py): starts it, asks it for workers,
  restarts and recycles it; and the handle of one forked worker.
- `_launch`: starting the fork-server as the init of a pid namespace of its own.
- `_seccomp`: the system calls a worker may make, compiled once here into the program every worker loads.

It imports sandbox/protocol/; of the worker side it only names the fork-server's module in its bootstrap and
asks `sandbox.worker.confine.landlock_abi` which layers this kernel offers, for a debug note.
"""
