"""How long an address that keeps sending wrong admin tokens waits (the console's sign-in; no browser needed)."""

from __future__ import annotations

from onetool.serve.ui._session import FREE_TRIES, MAX_WAIT, SignIns


def test_the_wait_doubles_after_the_free_tries_and_stops_at_its_cap_however_long_the_guessing_goes_on() -> None:
    sign_ins = SignIns()
    waits = []
    for _ in range(FREE_TRIES + 2):
        sign_ins.missed("192.0.2.1")
        waits.append(round(sign_ins.wait("192.0.2.1")))
    assert waits == [0] * (FREE_TRIES - 1) + [2, 4, 8]
    # A guess every five minutes for days: about 1,100 wrong tokens in a row (2 ** 1,100 overflowed a float).
    for _ in range(1_100):
        sign_ins.missed("192.0.2.1")
    assert MAX_WAIT - 1 < sign_ins.wait("192.0.2.1") <= MAX_WAIT
    assert sign_ins.wait("198.51.100.7") == 0
    sign_ins.signed_in("192.0.2.1")
    assert sign_ins.wait("192.0.2.1") == 0
