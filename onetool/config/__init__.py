"""onetool.yaml (or a client's ``mcpServers`` file) -> validated, strict pydantic models.

models.py holds every key with its type and default; loading.py reads, expands and validates a file.
"""

from onetool.config._loading import (
    expand_vars,
    from_client_config,
    load_config,
    no_config_found,
    read_config_file,
    validate,
    validate_server,
)
from onetool.config._models import (
    DEFAULT_MAX_DESCRIPTION_LEN,
    ENV_BRIDGE_TOKEN,
    ENV_BRIDGE_URL,
    BridgeConfig,
    Config,
    DirectConfig,
    HttpConfig,
    InspectConfig,
    LogConfig,
    Management,
    OAuthConfig,
    PacksConfig,
    SandboxConfig,
    ServerConfig,
    StateConfig,
    ToolFilter,
    TransportName,
    UiConfig,
    to_identifier,
)
from onetool.state.paths import DEFAULT_FILENAME, ENV_CONFIG, find_config

__all__ = [
    "DEFAULT_FILENAME",
    "DEFAULT_MAX_DESCRIPTION_LEN",
    "ENV_BRIDGE_TOKEN",
    "ENV_BRIDGE_URL",
    "ENV_CONFIG",
    "BridgeConfig",
    "Config",
    "DirectConfig",
    "HttpConfig",
    "InspectConfig",
    "LogConfig",
    "Management",
    "OAuthConfig",
    "PacksConfig",
    "SandboxConfig",
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
    "validate",
    "validate_server",
]
