"""The watch-freshness check behind the operator's liveness probe."""

from __future__ import annotations

from shoal.telemetry import stale_keys


def test_a_watch_that_catches_up_is_never_stale() -> None:
    seen: dict[tuple[str, str], float] = {}
    key = ("ns", "m")
    assert stale_keys({key: "2"}, {key: "1"}, seen, now=100.0) == {key: 0.0}
    assert stale_keys({key: "2"}, {key: "2"}, seen, now=105.0) == {}
    assert seen == {}


def test_a_stalled_watch_ages() -> None:
    seen: dict[tuple[str, str], float] = {}
    key = ("ns", "m")
    stale_keys({key: "2"}, {}, seen, now=100.0)
    assert stale_keys({key: "3"}, {key: "1"}, seen, now=250.0) == {key: 150.0}
