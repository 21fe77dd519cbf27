"""The config a running gateway serves, held in one place: a reload swaps it whole.

The gateway, the control plane (:class:`onetool.control.ServerControl`), the call path and each run read the config
through one :class:`Served`, never a copy of their own, so a reload cannot leave one part on the old file; what a
config section implies (the sandbox limits of a run) is derived with it, in the same swap, which the control plane
makes once it has merged the new file's servers (the lock held: no follower's sync reads a half-applied config).
"""

from __future__ import annotations

from onetool.config._models import Config, SandboxConfig
from sandbox import Limits

__all__ = ["Served", "limits_of"]


class Served:
    """The config now served, and the sandbox limits it sets; :meth:`swap` replaces both at once."""

    def __init__(self, config: Config) -> None:
        self.config = config
        self.limits = limits_of(config.sandbox)

    def swap(self, config: Config) -> None:
        """Serve ``config`` from now on: each call, run and listing after this reads it."""
        self.config, self.limits = config, limits_of(config.sandbox)


def limits_of(sandbox: SandboxConfig) -> Limits:
    """The sandbox limits a config's `sandbox:` section sets (the keys are the same)."""
    return Limits(**sandbox.model_dump(exclude={"max_concurrent_runs", "max_workers", "max_host_memory_mb"}))
