"""The worker's seccomp program: the system calls a confined worker may make, compiled once on the host.

The fork-server receives the compiled BPF program (hex, on its command line) and every worker it forks loads
it with one prctl (sandbox/worker/confine.py): no worker imports libseccomp or compiles anything per run.
"""

from __future__ import annotations

import errno
import os

__all__ = ["ALLOWED_SYSCALLS", "compile_filter"]

# System calls a running interpreter needs; anything else is EPERM. Not newfstatat: glibc's fstat uses it,
# but with a path too it resolves that path, and a confined worker never calls it (checked with strace).
ALLOWED_SYSCALLS = (
    "read",
    "write",
    "close",
    "lseek",
    "fstat",
    "brk",
    "mmap",
    "munmap",
    "mremap",
    "mprotect",
    "madvise",
    "futex",
    "rt_sigaction",
    "rt_sigprocmask",
    "rt_sigreturn",
    "sigaltstack",
    "clock_gettime",
    "clock_getres",
    "gettimeofday",
    "time",
    "clock_nanosleep",
    "nanosleep",
    "getpid",
    # The worker's own ids: a snippet may see that it is nobody.
    "getuid",
    "geteuid",
    "getgid",
    "getegid",
    "gettid",
    "getrandom",
    "getrusage",
    "sched_yield",
    "restart_syscall",
    "exit",
    "exit_group",
)


def compile_filter() -> bytes:
    """The BPF program, generated once by the host: a worker then neither imports libseccomp (30 ms of
    start-up) nor compiles it per run; confining costs one prctl."""
    import pyseccomp as seccomp  # host side only: the worker receives the compiled program

    flt = seccomp.SyscallFilter(seccomp.ERRNO(errno.EPERM))
    for name in ALLOWED_SYSCALLS:
        flt.add_rule(seccomp.ALLOW, name)
    # Reading limits is harmless; setting them is how root would undo them.
    flt.add_rule(seccomp.ALLOW, "prlimit64", seccomp.Arg(0, seccomp.EQ, 0), seccomp.Arg(2, seccomp.EQ, 0))
    read_fd, write_fd = os.pipe()
    try:
        with os.fdopen(write_fd, "wb", closefd=False) as sink:
            flt.export_bpf(sink)
        os.close(write_fd)
        write_fd = -1
        chunks = []
        while chunk := os.read(read_fd, 65536):
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(read_fd)
        if write_fd >= 0:
            os.close(write_fd)
