"""This gateway's stdio upstreams, so that none outlives it, ``kill -9`` included.

Each upstream's process group is told to the warden (:mod:`onetool.upstream.groups`), which ends the groups
still listed when the gateway goes, however it goes. Each is also recorded in the runtime folder, for when the
warden went too (the OOM killer, a ``kill -9`` of both): the next gateway of the same config ends those groups at
start, each only if its leader's start time still matches, so a pid the system has since given to another
process is never signalled.

A record is ``<runtime folder>/upstreams/<project key>/<gateway pid>.json``, 0600 in a 0700 folder: the gateway's
pid and start time, the boot id, and for each child its server, pid, process group and start time (clock ticks
since boot, from /proc). The project key is the config file's (``onetool.state.paths``): a gateway of another
config keeps its upstreams, and two live gateways of one config leave each other's alone. No environment value is
recorded.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import anyio
from pydantic import TypeAdapter, ValidationError

from onetool.logs import logger
from onetool.private import private_dir
from onetool.state.paths import project_key, runtime_dir, write_private
from onetool.upstream.groups import boot_id, end_group, start_time

__all__ = ["RECORDS", "Children", "watched_children"]

RECORDS: Final = "upstreams"
"""The runtime folder's subfolder that holds the records."""
_WARDEN: Final = Path(__file__).with_name("groups.py")
_WARDEN_EXIT: Final = 2.0  # seconds the warden has to end what is left and exit when we close
_MAX_RECORD: Final = 1 << 20  # a record of thousands of children is far smaller; anything larger is not ours


@dataclass(frozen=True)
class Child:
    """One recorded upstream process: it leads its group, so ``pgid`` is ``pid``; ``started`` tells it from a later
    process given the same pid."""

    server: str
    pid: int
    pgid: int
    started: int


@dataclass(frozen=True)
class _Gateway:
    pid: int
    started: int | None
    boot: str


@dataclass(frozen=True)
class _Record:
    gateway: _Gateway
    children: list[Child]


_RECORD = TypeAdapter(_Record)


class Children:
    """The process groups this gateway started and has not seen end: recorded, and listed to the warden."""

    def __init__(self, path: Path, warden: subprocess.Popen[bytes]) -> None:
        assert warden.stdin is not None
        self._path = path
        self._warden = warden
        self._to_warden = warden.stdin
        os.set_blocking(self._to_warden.fileno(), False)
        me = os.getpid()
        self._me = _Gateway(me, start_time(me), boot_id())
        self._children: dict[int, Child] = {}

    def add(self, server: str, pid: int) -> None:
        """Record a child just started as the leader of a process group of its own."""
        started = start_time(pid)
        if started is None:  # no /proc (not Linux): nothing names the process safely
            return
        self._children[pid] = Child(server, pid, pid, started)
        self._tell(f"+ {pid} {started}\n")
        self._save()

    def remove(self, pgid: int) -> None:
        """Forget a group that has ended."""
        if self._children.pop(pgid, None) is not None:
            self._tell(f"- {pgid}\n")
            self._save()

    def _tell(self, line: str) -> None:
        try:
            # Non-blocking and far below PIPE_BUF: one write, whole or not at all, never a wait on the event loop.
            os.write(self._to_warden.fileno(), line.encode())
        except OSError as e:
            logger.warning("the warden of stdio upstreams is not listening ({}): a killed gateway may leave them", e)

    def _save(self) -> None:
        record = _Record(self._me, list(self._children.values()))
        try:
            write_private(self._path, _RECORD.dump_json(record).decode())
        except OSError as e:
            logger.warning("cannot record the stdio upstreams in {}: {}", self._path, e)

    async def _close(self) -> None:
        """Let the warden end what is still listed (nothing, after an orderly stop) and wait until it has."""
        self._to_warden.close()
        with anyio.move_on_after(_WARDEN_EXIT):
            while self._warden.poll() is None:
                await anyio.sleep(0.01)
        if self._warden.poll() is None:
            self._warden.kill()
            self._warden.wait()
        with suppress(OSError):
            self._path.unlink()


@asynccontextmanager
async def watched_children(config_path: Path | None) -> AsyncIterator[Children]:
    """End what gone gateways of this config left running, start the warden; at exit, let it end what is left."""
    folder = runtime_dir() / RECORDS / project_key(config_path)
    reap_stale(folder)
    # -I -S: the standard library only and no environment, so it starts in milliseconds. A session of its own: a
    # terminal's Ctrl-C is for the gateway, and must not end the warden before the gateway is done.
    warden = subprocess.Popen(
        [sys.executable, "-I", "-S", str(_WARDEN)],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        env={},
        start_new_session=True,
    )
    children = Children(folder / f"{os.getpid()}.json", warden)
    try:
        yield children
    finally:
        with anyio.CancelScope(shield=True):
            await children._close()


def reap_stale(folder: Path) -> None:
    """End the groups recorded by gateways of this config that are gone, and forget their records. A live
    gateway's record is left as it is, and so is a group whose leader's pid is now another process."""
    try:
        paths = list(private_dir(folder).glob("*.json"))
    except OSError as e:
        logger.warning("cannot read the records of stdio upstreams in {}: {}", folder, e)
        return
    boot = boot_id()
    for path in paths:
        record = _load(path)
        if record is not None and start_time(record.gateway.pid) == record.gateway.started:
            continue  # that gateway still runs
        if record is not None and record.gateway.boot == boot:
            for child in record.children:
                if end_group(child.pgid, child.started):
                    logger.bind(server=child.server, pid=child.pid).warning(
                        "server '{}': ended process group {}, left running by a gateway that was killed",
                        child.server,
                        child.pgid,
                    )
        with suppress(OSError):
            path.unlink()


def _load(path: Path) -> _Record | None:
    """The record in ``path``; None when it is unreadable or not a record."""
    try:
        with path.open("rb") as f:
            return _RECORD.validate_json(f.read(_MAX_RECORD))
    except (OSError, ValidationError):
        return None
