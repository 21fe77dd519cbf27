"""The first wave: from a gateway's start until every enabled server's first connection attempt has ended
(connected or failed), bounded by ``startup_wait``.

Liveness never waits on upstreams (``/health`` and ``initialize`` answer at once), but the catalogue does: what
shows or resolves tools (every face's ``tools/list`` and ``tools/call``, a run and its pre-check,
``/runtime/tools.py``, ``/status``) awaits :meth:`FirstWave.wait` first, so a client that lists once right after
``initialize`` sees every server that connects within ``startup_wait``, and ``/ready`` names the servers
still on their first attempt meanwhile. Past ``startup_wait`` they answer with what is there, and a late server
follows with ``tools/list_changed`` as any later change does. The changes the wave brings are told as one: the
gateway holds its change cues while the wave is on and lets the one that ends it through (:meth:`FirstWave.hold`).
"""

from __future__ import annotations

from collections.abc import Iterable

import anyio

__all__ = ["STARTUP_WAIT_CAP", "FirstWave", "default_startup_wait"]

STARTUP_WAIT_CAP = 30.0
"""The longest default ``startup_wait``, in seconds. A client waits on its first ``tools/list`` that long at most,
and clients give a request about a minute (the TypeScript SDK's default request timeout, which Claude Desktop,
Cursor and the MCP Inspector use, is 60 s): waiting longer would fail the very list the wait is for, while an
answer at half of it leaves the client its margin, and a server slower than that follows with list_changed."""


def default_startup_wait(connect_timeouts: Iterable[float]) -> float:
    """``startup_wait`` when the config sets none: the largest connect timeout of the enabled servers (the first
    wave cannot last longer), at most :data:`STARTUP_WAIT_CAP`."""
    return min(max(connect_timeouts, default=0.0), STARTUP_WAIT_CAP)


class FirstWave:
    """The servers still on their first connection attempt, and the event that the wave is over.

    The gateway tells it each server whose change it has read (:meth:`settled`): a server counts as settled only
    once the gateway has read the change that ended its attempt, so the registry that opens the gate is the one
    built from every such change, and no cue of the wave is read after the gate opened.
    """

    def __init__(self, servers: Iterable[str] = ()) -> None:
        self._pending = set(servers)
        self._over = anyio.Event()
        self._held = False
        if not self._pending:
            self._over.set()

    @property
    def over(self) -> bool:
        return self._over.is_set()

    def pending(self) -> list[str]:
        """The servers still on their first attempt while the wave is on, by name; none once it is over."""
        return [] if self.over else sorted(self._pending)

    def settled(self, server: str) -> None:
        """``server``'s first attempt ended (or it was removed): the gateway read the change that says so."""
        self._pending.discard(server)

    def hold(self) -> bool:
        """Whether a change cue is held back: while servers of the wave are pending. The cue that finds none
        pending ends the wave and goes out, the one cue of the whole wave."""
        if self.over:
            return False
        if self._pending:
            self._held = True
            return True
        self._over.set()
        return False

    def end(self) -> bool:
        """End the wave now (``startup_wait`` passed): whether cues were held meanwhile, to be told as one."""
        if self.over:
            return False
        self._over.set()
        return self._held

    async def wait(self) -> None:
        """Return once the wave is over."""
        await self._over.wait()
