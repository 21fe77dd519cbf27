"""The pauses between reconnect attempts (and between probes of an unresponsive server).

Exponential from ``base`` with jitter, capped at the server's ``max_backoff``: a server that comes back is
found within that cap whatever the length of its outage. The sequence starts over only after a session stayed
up ``stable_after`` seconds (see Connection.run): a server that dies right after each connect is not restarted
every half second forever.
"""

from __future__ import annotations

from tenacity.wait import wait_base, wait_exponential_jitter


def backoff_wait(base: float, cap: float) -> wait_base:
    return wait_exponential_jitter(multiplier=base, max=cap, jitter=base)


class ShortSession(Exception):
    """A session ended before it proved stable: the next attempt waits as after a failed one."""

    def __init__(self, seconds: float) -> None:
        super().__init__(f"the session lasted only {seconds:.1f} s")
        self.seconds = seconds
