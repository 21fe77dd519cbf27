"""onetool.yaml (or a client's ``mcpServers`` file) -> validated, strict pydantic models.

_models.py holds every key with its type and default; _loading.py reads, expands and validates a file; clients.py
reads the config files of MCP clients; reload.py says what a re-read config changed. Names load on first use, so
``import onetool.config.clients`` (shell completion reads a client's file with it) pays for neither pydantic nor
loguru.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from onetool.lazy import lazy_exports
from onetool.state.paths import DEFAULT_FILENAME, ENV_CONFIG, find_config

if TYPE_CHECKING:
    from onetool.config._loading import (
        expand_vars,
        from_client_config,
        load_config,
        no_config_found,
        read_config_file,
        unset_references,
        validate,
        validate_server,
    )
    from onetool.config._models import (
        DEFAULT_MAX_DESCRIPTION_LEN,
        ENV_BRIDGE_TOKEN,
        ENV_BRIDGE_URL,
        MACHINE_GRANTS,
        BridgeConfig,
        ClientAuth,
        Config,
        DirectConfig,
        Exposure,
        HttpConfig,
        InspectConfig,
        LogConfig,
        Management,
        OAuthConfig,
        OAuthGrant,
        OtelConfig,
        PacksConfig,
        RegistryConfig,
        SamplingConfig,
        SandboxConfig,
        SearchConfig,
        Semantic,
        ServerConfig,
        StateConfig,
        ToolFilter,
        TransportName,
        UiConfig,
        to_identifier,
    )

_EXPORTS = {
    "expand_vars": "_loading",
    "from_client_config": "_loading",
    "load_config": "_loading",
    "no_config_found": "_loading",
    "read_config_file": "_loading",
    "unset_references": "_loading",
    "validate": "_loading",
    "validate_server": "_loading",
    "DEFAULT_MAX_DESCRIPTION_LEN": "_models",
    "ENV_BRIDGE_TOKEN": "_models",
    "ENV_BRIDGE_URL": "_models",
    "MACHINE_GRANTS": "_models",
    "BridgeConfig": "_models",
    "ClientAuth": "_models",
    "Config": "_models",
    "DirectConfig": "_models",
    "Exposure": "_models",
    "HttpConfig": "_models",
    "InspectConfig": "_models",
    "LogConfig": "_models",
    "Management": "_models",
    "OAuthConfig": "_models",
    "OAuthGrant": "_models",
    "OtelConfig": "_models",
    "PacksConfig": "_models",
    "RegistryConfig": "_models",
    "SamplingConfig": "_models",
    "SandboxConfig": "_models",
    "SearchConfig": "_models",
    "Semantic": "_models",
    "ServerConfig": "_models",
    "StateConfig": "_models",
    "ToolFilter": "_models",
    "TransportName": "_models",
    "UiConfig": "_models",
    "to_identifier": "_models",
}

__all__ = [
    "DEFAULT_FILENAME",
    "DEFAULT_MAX_DESCRIPTION_LEN",
    "ENV_BRIDGE_TOKEN",
    "ENV_BRIDGE_URL",
    "ENV_CONFIG",
    "MACHINE_GRANTS",
    "BridgeConfig",
    "ClientAuth",
    "Config",
    "DirectConfig",
    "Exposure",
    "HttpConfig",
    "InspectConfig",
    "LogConfig",
    "Management",
    "OAuthConfig",
    "OAuthGrant",
    "OtelConfig",
    "PacksConfig",
    "RegistryConfig",
    "SamplingConfig",
    "SandboxConfig",
    "SearchConfig",
    "Semantic",
    "ServerConfig",
    "StateConfig",
    "ToolFilter",
    "TransportName",
    "UiConfig",
    "expand_vars",
    "find_config",
    "from_client_config",
    "load_config",
    "no_config_found",
    "read_config_file",
    "to_identifier",
    "unset_references",
    "validate",
    "validate_server",
]

__getattr__ = lazy_exports(__name__, _EXPORTS)
