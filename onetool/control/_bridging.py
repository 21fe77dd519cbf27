"""The control plane's side of the bridge: which servers are converted, and convert/revert as control errors.

A converted server keeps its name, pack, overrides and approvals; only the entry the pool connects changes
(its stdio entry -> the bridged URL). Every failure of the bridge to convert is a :class:`ControlError` with the
bridge's status (400 refused spec, 429 full, 503 unavailable), raised before anything changed here. A revert
never waits for the bridge: it is done here at once, and a bridge that cannot stop the server now is asked
again in the background (``conversions.finish_stops``).
"""

from __future__ import annotations

from collections.abc import Mapping

from onetool.config import BridgeConfig, ServerConfig
from onetool.control.bridge_client import BridgeClient
from onetool.control.conversions import Conversions, http_entry
from onetool.errors import BridgeError, ControlError
from onetool.logs import logger
from onetool.state import Actor, ConvertedServer, StateStore

NO_BRIDGE = "no bridge is configured: set bridge.url (and bridge.token) in the config, or $ONETOOL_BRIDGE_URL"


class Bridging:
    def __init__(self, config: BridgeConfig, store: StateStore) -> None:
        self._bridge = BridgeClient.from_config(config)
        self._store = store
        self.conversions = Conversions(self._bridge, store) if self._bridge is not None else None
        """None without a configured bridge: nothing is re-registered, converted servers run over stdio."""

    def entry(self, spec: ServerConfig, url: str) -> ServerConfig:
        """What the pool connects for ``spec`` served by the configured bridge at ``url``."""
        assert self._bridge is not None, "an entry for a bridge that is not configured"
        return http_entry(spec, url, self._bridge)

    async def entries(self, servers: Mapping[str, ServerConfig]) -> dict[str, ServerConfig]:
        """The recorded conversions of ``servers`` as the entries to connect (at startup: no request to the bridge)."""
        found: dict[str, ServerConfig] = {}
        for name, record in (await self._store.conversions()).items():
            spec = servers.get(name)
            if spec is None:
                logger.bind(server=name).warning(
                    "server '{}' is recorded as converted but is not configured; forget it with "
                    "`onetool servers revert {}` once it is back, or ignore this",
                    name,
                    name,
                )
            elif self._bridge is None:
                logger.bind(server=name).warning(
                    "server '{}' was converted to {}, but {}; it runs over stdio (revert it to forget the conversion)",
                    name,
                    record.url,
                    NO_BRIDGE,
                )
            else:
                try:
                    found[name] = self.entry(spec, self._bridge.served(name, record.url))
                except BridgeError as e:  # a plain-http URL recorded while bridge.allow_http was set
                    logger.bind(server=name).warning("server '{}' runs over stdio: {}", name, e)
        return found

    async def convert(self, name: str, spec: ServerConfig, *, actor: Actor) -> ServerConfig:
        """Have the bridge run ``spec`` and record it; the entry to connect. Nothing changed if this raises."""
        if spec.command is None:
            raise ControlError(f"only stdio servers can be converted; '{name}' is a {spec.transport} server")
        if self.conversions is None:
            raise ControlError(f"cannot convert '{name}': {NO_BRIDGE}")
        try:
            return await self.conversions.convert(name, spec, actor=actor)
        except BridgeError as e:
            raise ControlError(str(e), e.status) from None

    async def revert(self, name: str, *, actor: Actor) -> ConvertedServer:
        """Forget the conversion and stop ``name`` on the bridge (now, or in the background when the bridge
        cannot be reached); its record. Only the state store can make this fail."""
        record = await self._store.conversion(name)
        if record is None:
            raise ControlError(f"server '{name}' is not converted", 409)
        if self.conversions is None:
            # Nothing to stop: no bridge is known. Forgetting the record is all a revert can do.
            await self._store.remove_conversion(name, actor)
            return record
        await self.conversions.revert(name, actor=actor)
        return record

    async def forget(self, name: str, *, actor: Actor) -> None:
        """Revert ``name`` if it is converted (once it is removed)."""
        if await self._store.conversion(name) is not None:
            await self.revert(name, actor=actor)
