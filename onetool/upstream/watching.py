"""What runs beside a live session: noticing catalogue changes, a dead or hung upstream, and one that recovered.

Handshake-era servers push `tools/list_changed`; 2026-era ones answer a `subscriptions/listen` stream. A server
that has answered nothing for a while is probed (:func:`ping`); one that does not answer the probe is dropped and
reconnected. A session whose breaker opened is probed at growing intervals until it answers (breaker.py).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import anyio
import anyio.abc
import mcp.types as types
from loguru import logger
from mcp import Client
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from tenacity import AsyncRetrying, retry_if_exception_type

from onetool.config import ServerConfig
from onetool.upstream.backoff import backoff_wait
from onetool.upstream.session import Session, describe_failure, list_all_tools
from onetool.upstream.status import Failure


class Watching:
    """Mixed into Connection: the tasks its owner runs beside a live session."""

    name: str
    config: ServerConfig
    tools: list[types.Tool]
    _probe_interval: float
    _backoff_base: float
    _on_change: Callable[[str], None]

    def _lose(self, session: Session, failure: Failure) -> None: ...

    async def _refresh_on_change(self, session: Session, client: Client) -> None:
        while True:
            await session.refresh.wait()
            session.refresh = anyio.Event()
            try:
                with anyio.fail_after(self.config.connect_timeout):
                    self.tools = await list_all_tools(client)
            except Exception as e:
                logger.bind(server=self.name).warning(
                    "server '{}': refreshing the tool list failed: {}",
                    self.name,
                    describe_failure(e, session, self.name, self.config).for_operators(),
                )
                continue
            logger.bind(server=self.name, toolCount=len(self.tools)).info("server '{}': tool list changed", self.name)
            self._on_change(self.name)

    async def _probe(self, session: Session, client: Client) -> None:
        """Probe the server whenever it has answered nothing for ``probe_interval`` seconds; drop the session if
        the probe gets no answer within ``connect_timeout``.

        A stdio child's death closes its stdout, which the transport notices at once, but a hung or stopped one
        says nothing, and neither does an idle HTTP session whose server died. Dropping the session restarts a
        stdio child and reconnects either kind.
        """
        while True:
            quiet = anyio.current_time() - session.answered_at
            if quiet < self._probe_interval:
                await anyio.sleep(self._probe_interval - quiet)
                continue
            try:
                with anyio.fail_after(self.config.connect_timeout):
                    await self._ping(session, client)
            except TimeoutError:
                reason = f"no answer to a ping within {self.config.connect_timeout} s"
                self._lose(session, Failure(f"health check failed: {reason}"))
                return
            except Exception as e:
                failure = describe_failure(e, session, self.name, self.config)
                self._lose(session, Failure(f"health check failed: {failure.reason}", failure.detail))
                return

    async def _mind_breaker(self, session: Session, client: Client) -> None:
        """Each time the session's breaker opens: probe at growing intervals (the reconnect backoff, capped at
        ``max_backoff``) until the server answers, then close it."""
        breaker = session.breaker
        while True:
            await breaker.tripped.wait()
            logger.bind(server=self.name, timeouts=breaker.timeouts).warning(
                "server '{}' is unresponsive: {} calls in a row timed out; calls to it fail at once until it answers "
                "a ping",
                self.name,
                breaker.timeouts,
            )
            self._on_change(self.name)

            async def wait(delay: float) -> None:
                breaker.probe_at = anyio.current_time() + delay
                await anyio.sleep(delay)

            await wait(self._backoff_base)
            async for attempt in AsyncRetrying(
                wait=backoff_wait(self._backoff_base, self.config.max_backoff),
                retry=retry_if_exception_type(Exception),
                sleep=wait,
            ):
                with attempt, anyio.fail_after(self.config.connect_timeout):
                    await self._ping(session, client)
            breaker.close()
            logger.bind(server=self.name).info("server '{}' answers again: calls to it resume", self.name)
            self._on_change(self.name)

    async def _ping(self, session: Session, client: Client) -> None:
        """MCP ping on a handshake-era session. 2026-07-28 removed ping: there the probe is ``tools/list``, which
        every server serves, and whose answer also catches a catalogue change the server never announced."""
        if client.protocol_version not in MODERN_PROTOCOL_VERSIONS:
            await client.session.send_ping()
        else:
            tools = await list_all_tools(client)
            if tools != self.tools:
                self.tools = tools
                self._on_change(self.name)
        session.answered()

    async def _listen(
        self,
        session: Session,
        client: Client,
        *,
        task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
    ) -> None:
        started = False
        try:
            with anyio.CancelScope(deadline=anyio.current_time() + self.config.connect_timeout) as deadline:
                async with client.listen(tools_list_changed=True) as events:
                    deadline.deadline = math.inf
                    task_status.started()
                    started = True
                    async for _ in events:
                        session.refresh.set()
        except Exception as e:
            # Not every 2026-era server serves subscriptions/listen; its catalogue is then static.
            logger.bind(server=self.name).debug("server '{}': no tools/list_changed stream: {}", self.name, e)
        if not started:
            task_status.started()
