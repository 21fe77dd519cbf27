"""A large value is cut in the worker (sandbox/worker/_result.py), and the host takes only a well-formed head."""

from __future__ import annotations

import json
from typing import Any

import pytest

from sandbox import Limits
from sandbox.protocol.channel import ProtocolError
from sandbox.protocol.messages import Done, parse
from sandbox.protocol.shaping import MEDIA_WALK, MIN_SHOWN
from sandbox.worker._result import text_head

IMAGE = {"type": "image", "data": "aGVsbG8=", "mimeType": "image/png"}


def test_a_value_longer_than_shown_is_its_compact_head_and_length() -> None:
    value = [{"a": "é"}] * 10_000
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    assert text_head(value, 2000) == (text[:2000], len(text))
    assert text_head("x" * 5000, 2000) == ("x" * 2000, 5000)
    # The result shows at least MIN_SHOWN characters, however little max_output is.
    assert text_head("x" * 5000, 10) == ("x" * MIN_SHOWN, 5000)


def test_what_fits_or_may_hold_media_is_sent_whole() -> None:
    assert text_head([1, 2, 3], 2000) is None
    assert text_head(10**300, 10) is None
    assert text_head([IMAGE] + [{}] * 5000, 2000) is None
    assert text_head({"a": [[{"b": IMAGE}]]}, 10) is None
    # Where the host's search for media never looks, there are none to find: past its depth or its budget.
    assert text_head([[[[[[IMAGE]]]]]] + [{}] * 5000, 2000) is not None
    assert text_head([{}] * MEDIA_WALK + [IMAGE], 2000) is not None


def done(**fields: Any) -> dict[str, Any]:
    return {"op": "done", "value": None, "output": "", "error": None, **fields}


def test_the_host_takes_a_head_only_within_its_bounds() -> None:
    limits = Limits(max_output=2000)
    assert parse(done(text="x" * 2000, length=9000), limits) == Done(None, "", None, ("x" * 2000, 9000))
    for hostile in (
        done(text="x" * 2001, length=9000),  # more than the host shows
        done(text="x" * 100, length=99),  # shorter than itself
        done(text="x" * 100, length="many"),
        done(text=["x"], length=100),
        done(value=[1], text="x", length=100),  # a value and a head
    ):
        with pytest.raises(ProtocolError):
            parse(hostile, limits)
