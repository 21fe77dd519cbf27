"""Runtime state: servers added at run time, overrides, approved tool fingerprints, converted servers, the audit log.

The public API is re-exported here. Names load lazily, so ``import onetool.state.paths`` (the discovery file
needs it) does not pay for SQLAlchemy and Alembic, and the CLI stays fast when a gateway is running.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from onetool.lazy import lazy_exports

if TYPE_CHECKING:
    from onetool.state._store import HeldOAuthRecord, Snapshot, StateStore
    from onetool.state.fingerprint import canonical_json, describe_change, tool_fingerprint
    from onetool.state.paths import runtime_dir, state_dir
    from onetool.state.records import Actor, AddedServer, ApprovedTool, AuditEntry, ConvertedServer, Override

_EXPORTS = {
    "HeldOAuthRecord": "_store",
    "Snapshot": "_store",
    "StateStore": "_store",
    "Actor": "records",
    "AddedServer": "records",
    "ApprovedTool": "records",
    "AuditEntry": "records",
    "ConvertedServer": "records",
    "Override": "records",
    "canonical_json": "fingerprint",
    "describe_change": "fingerprint",
    "tool_fingerprint": "fingerprint",
    "runtime_dir": "paths",
    "state_dir": "paths",
}

__all__ = [
    "Actor",
    "AddedServer",
    "ApprovedTool",
    "AuditEntry",
    "ConvertedServer",
    "HeldOAuthRecord",
    "Override",
    "Snapshot",
    "StateStore",
    "canonical_json",
    "describe_change",
    "runtime_dir",
    "state_dir",
    "tool_fingerprint",
]


__getattr__ = lazy_exports(__name__, _EXPORTS)
