"""The one answer to "is this name a tool the caller may call, and if not, why not?" (Registry.sight and its
siblings), which run, the pre-check, proxy.*, exec, /mcp/direct and the upstreams' prompts and resources all take."""

from __future__ import annotations

from dataclasses import replace

import pytest

from onetool.errors import ServerHeld, UnknownPack, UnknownTool, UpstreamUnavailable
from onetool.registry import Pack, Registry, Unseen, UpstreamTool
from onetool.upstream import ServerState, ServerStatus
from tests.catalogue import STR, obj, upstream_tool

ECHO = obj({"message": STR})


def status(name: str, state: ServerState, error: str | None = None) -> ServerStatus:
    return ServerStatus(name, name.replace("-", "_"), "stdio", True, state, error, 1, None, None)


def renamed(tool: UpstreamTool, server: str, remote: str) -> UpstreamTool:
    return replace(tool, server=server, remote_name=remote)


@pytest.fixture
def registry() -> Registry:
    """One server of each kind: connected (with an upstream name that is no identifier), disconnected (its tools
    still known), failed before it listed any, connecting, disabled; one held for review; a local pack."""
    up = renamed(upstream_tool("git_hub", "get_repo", ECHO, "A repo."), "git-hub", "get-repo")
    lost = upstream_tool("lost", "echo", ECHO, "Echo.")
    packs = {
        "git_hub": Pack("git_hub", {"get_repo": up}, server="git-hub"),
        "lost": Pack("lost", {"echo": lost}, server="lost"),
        "broken": Pack("broken", {}, server="broken"),
        "slow": Pack("slow", {}, server="slow"),
        "off": Pack("off", {}, server="off"),
        "mine": Pack("mine", {}),
    }
    statuses = {
        "git-hub": status("git-hub", ServerState.CONNECTED),
        "lost": status("lost", ServerState.DISCONNECTED, "connection lost"),
        "broken": status("broken", ServerState.FAILED, "command not found"),
        "slow": status("slow", ServerState.CONNECTING),
        "off": status("off", ServerState.DISABLED),
    }
    return Registry(packs, statuses, {"shady": "quarantined"})


def test_a_visible_tool_is_found_by_every_face_s_names(registry: Registry) -> None:
    by_pack = registry.sight("git_hub", "get_repo")
    by_upstream = registry.sight_upstream("git-hub", "get-repo")
    by_pack_of_server = registry.sight_upstream("git_hub", "get-repo")
    assert by_pack.why is None and by_pack.tool is not None
    assert by_pack.tool is by_upstream.tool is by_pack_of_server.tool
    assert registry.sight_server("git-hub").why is None and registry.sight_server("git_hub").server == "git-hub"


def test_a_known_tool_of_a_lost_server_is_still_found_the_call_reconnects_it(registry: Registry) -> None:
    sight = registry.sight("lost", "echo")
    assert sight.tool is not None and sight.why is None and sight.status is not None
    assert registry.sight_server("lost").why is Unseen.DISCONNECTED


@pytest.mark.parametrize(
    ("pack", "why"),
    [
        ("lost", Unseen.DISCONNECTED),
        ("broken", Unseen.FAILED),
        ("slow", Unseen.CONNECTING),
        ("off", Unseen.DISABLED),
    ],
)
def test_a_tool_of_a_server_that_is_not_connected_is_unavailable_not_unknown(
    registry: Registry, pack: str, why: Unseen
) -> None:
    sight = registry.sight(pack, "nope")
    assert sight.why is why and why.down and sight.server == pack
    assert registry.sight_upstream(pack, "nope").why is why
    assert registry.sight_server(pack).why is why
    refused = sight.refusal(f"{pack}.nope")
    assert isinstance(refused, UpstreamUnavailable) and refused.server == pack
    with pytest.raises(UpstreamUnavailable, match=f"server '{pack}' is unavailable"):
        registry.resolve(pack, "nope")


def test_a_server_held_for_review_says_so_by_either_name_and_never_shows_a_tool(registry: Registry) -> None:
    for sight in (registry.sight("shady", "x"), registry.sight_upstream("shady", "x"), registry.sight_server("shady")):
        assert sight.why is Unseen.HELD and sight.tool is None and sight.server == "shady"
        assert isinstance(sight.refusal(), ServerHeld)
    held = r"server 'shady' is unavailable: held for review by an operator \(quarantined\)"
    with pytest.raises(ServerHeld, match=held):
        registry.resolve("shady", "x")


def test_an_unknown_name_is_unknown_in_the_face_s_own_words(registry: Registry) -> None:
    nowhere = registry.sight("nowhere", "x")
    assert nowhere.why is Unseen.UNKNOWN and nowhere.pack is None and nowhere.refusal() is None
    with pytest.raises(UnknownPack, match="unknown pack 'nowhere'; available packs: broken, git_hub, lost, mine"):
        registry.resolve("nowhere", "x")
    typo = registry.sight("git_hub", "get_rep")
    assert typo.why is Unseen.UNKNOWN and typo.pack is not None and typo.refusal() is None
    with pytest.raises(UnknownTool, match="pack 'git_hub' has no tool 'get_rep'; did you mean get_repo"):
        registry.resolve("git_hub", "get_rep")
    # proxy.call names the upstream's own name: the identifier form is no upstream name.
    assert registry.sight_upstream("git-hub", "get_repo").why is Unseen.UNKNOWN


def test_a_local_pack_is_no_server(registry: Registry) -> None:
    assert registry.sight("mine", "x").why is Unseen.UNKNOWN
    assert registry.sight_upstream("mine", "x").why is Unseen.UNKNOWN
    assert registry.sight_server("mine").why is Unseen.UNKNOWN
