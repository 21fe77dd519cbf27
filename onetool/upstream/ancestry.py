"""The recursion guard: a gateway never runs, as one of its own upstreams, a gateway of its own config.

A config that lists OneTool itself (``onetool serve`` with this config) as a stdio server is refused when it is
loaded (:mod:`onetool.config`); this catches what that cannot see (``$ONETOOL_CONFIG``, a wrapper script, ``uvx``):
every stdio upstream inherits ``$ONETOOL_GATEWAYS``, the project keys of the gateways above it, and a gateway
whose own key is among them refuses to start, before it starts anything.
"""

from __future__ import annotations

import os
from pathlib import Path

from onetool.errors import ConfigError
from onetool.state.paths import project_key

__all__ = ["ENV_GATEWAYS", "enter", "inherited"]

ENV_GATEWAYS = "ONETOOL_GATEWAYS"
_SEPARATOR = ":"


def enter(config: Path | None) -> None:
    """Refuse to serve ``config`` under a gateway of the same config; else record it for the upstreams."""
    above = [key for key in os.environ.get(ENV_GATEWAYS, "").split(_SEPARATOR) if key]
    key = project_key(config)
    if key in above:
        raise ConfigError(
            f"this gateway ({config or 'no config file'}) was started as an upstream server of a gateway of the same "
            "config: it would start itself again and again; remove the server that runs OneTool from the config"
        )
    os.environ[ENV_GATEWAYS] = _SEPARATOR.join([*above, key])


def inherited() -> dict[str, str]:
    """What a stdio upstream of this process inherits from the guard."""
    chain = os.environ.get(ENV_GATEWAYS)
    return {ENV_GATEWAYS: chain} if chain else {}
