"""What runs beside a live session: noticing catalogue changes, and that an idle HTTP upstream died.

Handshake-era servers push `tools/list_changed`; 2026-era ones answer a `subscriptions/listen` stream; an
HTTP upstream that says nothing is probed now and then with `tools/list`.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import anyio
import anyio.abc
import mcp.types as types
from loguru import logger
from mcp import Client

from onetool.config import ServerConfig
from onetool.upstream.session import Session, describe_failure, list_all_tools
from onetool.upstream.status import Failure


class Watching:
    """Mixed into Connection: the tasks its owner runs beside a live session."""

    name: str
    config: ServerConfig
    tools: list[types.Tool]
    _probe_interval: float
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
        """Ask an HTTP upstream for its tools now and then, so a dead one turns disconnected without a call.

        A stdio child's death closes its stdout, which the transport notices at once; an idle HTTP
        session has no such signal. ``tools/list`` exists in both protocol eras (``ping`` does not),
        and it also catches catalogue changes a server never announced.
        """
        while True:
            await anyio.sleep(self._probe_interval)
            try:
                with anyio.fail_after(self.config.connect_timeout):
                    tools = await list_all_tools(client)
            except Exception as e:
                failure = describe_failure(e, session, self.name, self.config)
                self._lose(session, Failure(f"health check failed: {failure.reason}", failure.detail))
                return
            if tools != self.tools:
                self.tools = tools
                self._on_change(self.name)

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
