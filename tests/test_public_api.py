"""The public API does not change by accident: each public package's ``__all__`` is pinned here, and every name in
it resolves. A change that means to add, rename or drop a public name changes this list in the same commit."""

from __future__ import annotations

import importlib

import pytest

PUBLIC: dict[str, list[str]] = {
    "onetool": [
        "Calls",
        "Config",
        "Gateway",
        "ModelError",
        "OneToolError",
        "PackContext",
        "__version__",
        "load_config",
    ],
    "onetool.errors": [
        "ArgumentError",
        "AttachError",
        "AuthError",
        "BridgeError",
        "BridgeUnavailable",
        "ConfigError",
        "ControlError",
        "LostRace",
        "ModelError",
        "NotRunning",
        "OneToolError",
        "PortInUse",
        "RunError",
        "ServeError",
        "ServerExists",
        "ServerHeld",
        "SeveralGateways",
        "StateError",
        "StatusError",
        "StoreUnreachable",
        "ToolFailed",
        "UnknownPack",
        "UnknownTool",
        "UpstreamError",
        "UpstreamTimeout",
        "UpstreamUnavailable",
        "Verdict",
    ],
    "onetool.control.actions": ["ACTIONS", "Action", "BUTTON_VERBS", "lookup", "model_verbs"],
    "onetool.core.calls": ["Calls", "OFF_LOOP_FROM", "PackContext", "REGISTRY_CATCH_UP", "shaped", "value_size"],
    "onetool.core.gateway": ["Gateway"],
    "onetool.config.served": ["Served", "limits_of"],
    "onetool.registry": [
        "LocalTool",
        "Pack",
        "Registry",
        "Sight",
        "Tool",
        "ToolSchema",
        "Unseen",
        "UpstreamTool",
        "brief",
        "load_local_packs",
    ],
    "onetool.serve.app": ["FACES", "Face", "MAIN_PATH", "main_face", "mounted", "serve_gateway", "serve_unready"],
    "onetool.upstream": ["ServerState", "ServerStatus", "UpstreamPool"],
    "onetool.control": ["EXECUTION_ENV", "HeldTool", "ServerControl", "ServerView", "changes_what_runs"],
    # What snippets call as proxy.*: DESIGN's stable interface.
    "packs.proxy": [
        "call",
        "describe",
        "get_prompt",
        "list_prompts",
        "list_resources",
        "list_servers",
        "list_tools",
        "read_resource",
        "search",
    ],
    "onetool.search": [
        "DEFAULT_LIMIT",
        "Hit",
        "MAX_LIMIT",
        "MAX_QUERY_CHARS",
        "Model",
        "ToolIndex",
        "Visible",
        "query_terms",
        "semantic_model",
    ],
    "sandbox": [
        "ALLOWED_MODULES",
        "ArgumentError",
        "LimitError",
        "Limits",
        "OnCall",
        "OnProgress",
        "OnSites",
        "Origin",
        "PROGRESS_RATE",
        "PolicyError",
        "Ration",
        "RunError",
        "RunResult",
        "Sandbox",
        "SandboxLoad",
        "Site",
        "TOOL_ERRORS",
        "ToolError",
        "ToolTimeout",
        "ToolUnavailable",
        "UnknownTool",
        "Verdict",
        "one_line",
    ],
}


@pytest.mark.parametrize("name", sorted(PUBLIC))
def test_public_names_are_pinned(name: str) -> None:
    module = importlib.import_module(name)
    assert sorted(module.__all__) == PUBLIC[name]
    missing = [n for n in module.__all__ if not hasattr(module, n)]
    assert not missing, f"{name}.__all__ names what it does not have: {missing}"


def test_every_error_is_a_onetool_error_or_a_sandbox_type() -> None:
    import onetool.errors as errors

    for name in errors.__all__:
        value = getattr(errors, name)
        assert value in (errors.RunError, errors.Verdict) or issubclass(value, errors.OneToolError), name


def test_the_error_tree_drawn_in_the_errors_module_is_the_code() -> None:
    """Every error of onetool.errors is drawn under its own base in the module's docstring, and nothing else is."""
    import re

    import onetool.errors as errors

    assert errors.__doc__ is not None
    drawn: dict[str, str] = {}
    parents: list[str] = []
    for line in errors.__doc__.split("OneToolError\n", 1)[1].split("\n\n", 1)[0].splitlines():
        found = re.match(r"^([ │]*)[├└]── (\w+(?:, \w+)*)", line)
        assert found, line
        depth = len(found.group(1)) // 4 - 1  # the docstring indents the tree by four
        names = found.group(2).split(", ")
        parents[depth:] = [names[-1]]
        for name in names:
            drawn[name] = parents[depth - 1] if depth else "OneToolError"
    errors_in_code = {
        name: value.__mro__[1].__name__
        for name in errors.__all__
        if isinstance(value := getattr(errors, name), type) and issubclass(value, errors.OneToolError)
        if value is not errors.OneToolError
    }
    assert drawn == errors_in_code
