"""A model's proposals: shown whole (a model wrote every value), flagged where they change what runs, and bounded in
number and size (issue 42, classes 3 and 7; through a real gateway: tests/gateway/test_hostile_trust.py)."""

from __future__ import annotations

import pytest

from onetool.config import Config, validate_server
from onetool.control import EXECUTION_ENV, changes_what_runs
from onetool.control._views import launch
from onetool.control.offline import change_offline
from onetool.core.gateway import Gateway
from onetool.errors import ControlError

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize(
    "key",
    [
        "PATH",
        "LD_PRELOAD",
        "LD_LIBRARY_PATH",
        "DYLD_INSERT_LIBRARIES",
        "NODE_OPTIONS",
        "PYTHONPATH",
        "PYTHONSTARTUP",
        "BASH_ENV",
        "ENV",
        "npm_config_registry",
        "NPM_CONFIG_SCRIPT_SHELL",
        "UV_INDEX_URL",
        "https_proxy",
        "path",
    ],
)
def test_a_variable_that_changes_what_runs_is_flagged_with_why(key: str) -> None:
    why = changes_what_runs(key)
    assert why is not None and why in EXECUTION_ENV.values()


@pytest.mark.parametrize("key", ["API_KEY", "DEBUG", "TZ", "LANG", "PATHS_TO_IGNORE", "MY_PATH"])
def test_a_variable_that_only_configures_the_server_is_not(key: str) -> None:
    assert changes_what_runs(key) is None


def test_values_are_shown_only_when_asked_and_every_text_is_marked() -> None:
    config = validate_server("p", {"command": "npx\u202e", "args": ["-y\x1b"], "env": {"PATH": "/tmp:/bin", "K": "v"}})
    hidden = launch(config)
    assert "env" not in hidden and hidden["env_keys"] == ["K", "PATH"]
    assert hidden["command"] == "npx<U+202E RIGHT-TO-LEFT OVERRIDE>" and hidden["args"] == ["-y<U+001B CONTROL>"]
    assert hidden["flagged_env"] == [{"key": "PATH", "why": EXECUTION_ENV["PATH"]}]
    assert launch(config, values=True)["env"] == {"K": "v", "PATH": "/tmp:/bin"}
    remote = validate_server("r", {"url": "https://h.example/mcp", "headers": {"X-K": "v\n1"}})
    assert "headers" not in launch(remote)
    assert launch(remote, values=True)["headers"] == {"X-K": "v<U+000A CONTROL>1"}


CONFIG = Config.model_validate({"direct": {"max_proposals": 2, "max_proposal_bytes": 300}})


async def test_a_model_has_at_most_max_proposals_pending_and_each_at_most_max_proposal_bytes() -> None:
    async with Gateway(CONFIG, warm_workers=0) as gateway:
        control = gateway.control
        with pytest.raises(ControlError, match=r"direct.max_proposal_bytes") as big:
            await control.add("big", {"command": "npx", "args": ["x" * 400]}, actor="mcp")
        assert big.value.status == 413 and "at most 300" in str(big.value)
        for name in ("one", "two"):
            await control.add(name, {"command": "npx", "args": [name]}, actor="mcp")
        with pytest.raises(ControlError, match=r"direct.max_proposals = 2") as many:
            await control.add("three", {"command": "npx"}, actor="mcp")
        assert many.value.status == 429
        # Operators are not capped; a decision on a proposal frees its place.
        await control.add("mine", {"command": "npx", "enabled": False}, actor="api")
        await control.remove("one", actor="api")
        await control.add("three", {"command": "npx"}, actor="mcp")
        assert sorted(v.name for v in control.list() if v.status == "proposed") == ["three", "two"]


async def test_an_operator_may_remove_a_proposals_values_but_not_add_one() -> None:
    config = Config.model_validate({})
    async with Gateway(config, warm_workers=0) as gateway:
        control = gateway.control
        await control.add("p", {"command": "npx", "env": {"A": "model", "B": "model"}}, actor="mcp")
        for patch in ({"env": {"TOKEN": "operator-secret"}}, {"headers": {"Authorization": "x"}}, {"env": "x"}):
            with pytest.raises(ControlError, match="approve it first") as refused:
                await control.edit("p", {**patch, "timeout": 5}, actor="cli")
            assert refused.value.status == 409
        edited = await control.edit("p", {"env": {"B": None}, "timeout": 5}, actor="cli")
        assert edited.launch is not None and edited.launch["env"] == {"A": "model"}
        assert "operator-secret" not in str(control.get("p"))
    # With no gateway running, the CLI's edit goes to the store: the same rule.
    with pytest.raises(ControlError, match="approve it first"):
        await change_offline(config, "edit", "p", {"env": {"TOKEN": "operator-secret"}})
    assert "edited" in await change_offline(config, "edit", "p", {"env": {"A": None}})
