"""An exclusive lock on a file, for every process on the machine: what a SQLite store and a token folder hold a
server's OAuth record with while one process refreshes its token."""

from __future__ import annotations

import fcntl
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Final

import anyio

from onetool.errors import StateError

__all__ = ["POLL", "file_lock"]

POLL: Final = 0.02
"""Seconds between two tries at a lock held elsewhere (``flock`` has no asynchronous wait)."""


@asynccontextmanager
async def file_lock(lock: Path, wait: float, held: str) -> AsyncIterator[None]:
    """An exclusive ``flock`` on the file ``lock`` while inside, made with its folder (private to this user) when
    missing. Waits at most ``wait`` seconds for another holder, then raises StateError naming ``held``, what the
    lock guards. The kernel drops it when its holder exits, however it exits; two opens of the file conflict even
    within one process."""
    lock.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chmod(lock.parent, 0o700)  # also when it existed with wider permissions
    fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        locked = False
        with anyio.move_on_after(wait):
            while not (locked := _try_lock(fd)):
                await anyio.sleep(POLL)
        if not locked:
            raise StateError(
                f"{lock}: another process has held {held} for over {wait:g} s (refreshing its token?); try again"
            )
        yield
    finally:
        os.close(fd)  # releases the lock


def _try_lock(fd: int) -> bool:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True
