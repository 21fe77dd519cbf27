"""The Host and Origin rule of the HTTP front (every route: tests/serve/test_http.py and the hostile corpus)."""

from __future__ import annotations

import pytest

from onetool.hosts import HostRule

LOOPBACK = HostRule(frozenset({"127.0.0.1:8765", "localhost:8765", "[::1]:8765"}), frozenset({"http://127.0.0.1:8765"}))


@pytest.mark.parametrize(
    "host",
    ["127.0.0.1:8765", None, "localhost", "localhost:9", "10.1.2.3:8765", "[::1]", "[fd00::1]:80", "192.168.0.7"],
)
def test_hosts_no_rebinding_page_can_send_pass(host: str | None) -> None:
    """A DNS-rebinding page's Host is the attacker's DNS name: an address, localhost or no Host at all is not."""
    assert LOOPBACK.refusal(host, None) is None


@pytest.mark.parametrize(
    "host", ["evil.example", "evil.example:8765", "127.0.0.1.nip.io:8765", "localhost.evil.example", "[::1", "x:y:z"]
)
def test_a_dns_name_not_allowed_is_refused(host: str) -> None:
    refused = LOOPBACK.refusal(host, None)
    assert refused is not None and refused[0] == 421 and "http.allowed_hosts" in refused[1]


def test_an_origin_passes_when_it_is_the_requests_own_or_allowed() -> None:
    assert LOOPBACK.refusal("127.0.0.1:8765", "http://127.0.0.1:8765") is None
    assert LOOPBACK.refusal("10.1.2.3:8765", "http://10.1.2.3:8765") is None  # the console reached by address
    for origin in ("http://127.0.0.1:9999", "http://evil.example", "https://127.0.0.1:8765", "null"):
        refused = LOOPBACK.refusal("127.0.0.1:8765", origin)
        assert refused is not None and refused[0] == 403, origin


def test_without_allowed_hosts_beyond_loopback_the_token_guards_alone() -> None:
    assert HostRule(None, None).refusal("evil.example", "http://evil.example") is None
