"""What an operator sees of one live server: its :class:`ServerView` and the tools it holds for review, read from
its row of the table and the pool's status of it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from onetool.config import to_identifier
from onetool.control._table import LiveServer
from onetool.control._views import (
    FROM_CONFIG,
    PROPOSED,
    HeldTool,
    ServerView,
    launch,
    quarantined_tool,
    shown_status,
    tools_filter,
)

if TYPE_CHECKING:
    from onetool.upstream import UpstreamPool

__all__ = ["held_by", "view"]


def held_by(name: str, s: LiveServer, pool: UpstreamPool) -> list[HeldTool]:
    """What no face shows of this server until an admin approves it: every tool while it is quarantined, else
    those changed or new since its approval."""
    if not s.trust.quarantined:
        return list(s.trust.held.values())
    return [quarantined_tool(name, t) for t in (pool.tools(name) if name in pool else [])]


def view(name: str, s: LiveServer, pool: UpstreamPool) -> ServerView:
    if s.proposed:
        return ServerView(
            name=name,
            pack=to_identifier(name),
            type=s.config.transport,
            status=PROPOSED,
            enabled=s.enabled,
            quarantined=s.trust.quarantined,
            error=None,
            detail=None,
            fix=f"an operator approves it to run it: onetool servers approve {name}",
            tool_count=0,
            added_by=s.added_by or FROM_CONFIG,
            launch=launch(s.config, values=True),
            tools_filter=tools_filter(s.offered, set_at_run_time=s.tools_set is not None),
        )
    st = pool.server_status(name)
    return ServerView(
        name=name,
        pack=st.pack,
        type=st.type,
        status=shown_status(st, quarantined=s.trust.quarantined and s.enabled),
        enabled=s.enabled,
        quarantined=s.trust.quarantined,
        error=st.error or st.unresponsive,
        detail=st.detail,
        fix=st.fix,
        tool_count=st.tool_count,
        held_tools=sorted(h.tool for h in held_by(name, s, pool)),
        protocol_version=st.protocol_version,
        instructions=st.instructions,
        added_by=s.added_by or FROM_CONFIG,
        oauth_status=st.oauth_status,
        converted_to=s.bridged.url if s.bridged is not None else None,
        unresponsive=st.unresponsive,
        calls_in_flight=st.calls_in_flight,
        stderr=list(st.stderr),
        tools_filter=tools_filter(s.offered, set_at_run_time=s.tools_set is not None),
    )
