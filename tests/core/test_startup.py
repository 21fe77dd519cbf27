"""The first wave's bookkeeping (onetool.core.startup): what it waits for, the one cue it lets through, its default
bound. tests/serve/test_startup.py holds the real gateway to it on every face."""

from __future__ import annotations

import anyio
import pytest

from onetool.config import Config
from onetool.core.startup import STARTUP_WAIT_CAP, FirstWave, default_startup_wait

pytestmark = pytest.mark.anyio


def test_startup_wait_defaults_to_the_slowest_connect_timeout_within_the_cap() -> None:
    assert default_startup_wait([]) == 0
    assert default_startup_wait([5, 12]) == 12
    assert default_startup_wait([5, 600]) == STARTUP_WAIT_CAP == 30
    assert Config.model_validate({}).startup_wait is None
    assert Config.model_validate({"startup_wait": 0}).startup_wait == 0
    with pytest.raises(ValueError, match="startup_wait"):
        Config.model_validate({"startup_wait": -1})


async def test_the_wave_holds_cues_until_the_last_server_settles_and_lets_that_one_through() -> None:
    wave = FirstWave(["b", "a"])
    assert (wave.over, wave.pending()) == (False, ["a", "b"])
    assert wave.hold()  # a's change, read while b is pending: held
    wave.settled("a")
    assert wave.hold() and wave.pending() == ["b"]
    wave.settled("b")
    assert not wave.hold()  # the change that ends the wave is its one cue
    assert (wave.over, wave.pending()) == (True, [])
    assert not wave.hold() and not wave.end()  # later changes go out as they come
    with anyio.fail_after(1):
        await wave.wait()


def test_a_wave_ended_by_its_deadline_says_whether_it_held_a_cue() -> None:
    held = FirstWave(["slow"])
    assert held.hold()
    assert held.end() and held.over and held.pending() == []
    quiet = FirstWave(["slow"])
    assert not quiet.end()  # nothing to tell: no change came meanwhile
    assert FirstWave().over  # no server to wait for
