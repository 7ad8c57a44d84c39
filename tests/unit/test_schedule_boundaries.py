"""Scheduled windows at their exact boundaries, in several time zones.

The operator wakes at ``next_change`` and recomputes the floor there: a window must be
open from its start (inclusive) to its end (exclusive), and ``next_change`` must lie
strictly after ``now`` (a boundary returned as "now" would requeue at once, forever).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from zoneinfo import ZoneInfo

import pytest

from shoal.api.inferencemodel import Scaling
from shoal.render.schedule import Floor, floor_at, is_open, next_change

US = dt.timedelta(microseconds=1)
UTC = dt.UTC


def scaling(*windows: dict[str, object], min_replicas: int = 1) -> Scaling:
    return Scaling.model_validate(
        {"minReplicas": min_replicas, "maxReplicas": 10, "schedules": list(windows)}
    )


def window(
    name: str = "w",
    start: str = "0 8 * * *",
    duration: str = "10h",
    tz: str = "UTC",
    floor: int = 4,
) -> dict[str, object]:
    return {
        "name": name,
        "start": start,
        "duration": duration,
        "timeZone": tz,
        "minReplicas": floor,
    }


# Daily 08:00 for 10 hours, in zones east and west of UTC and one off the hour.
ZONES = [
    ("UTC", dt.datetime(2026, 6, 10, 8, tzinfo=UTC)),
    ("Europe/Paris", dt.datetime(2026, 6, 10, 6, tzinfo=UTC)),  # CEST, +02:00
    ("America/New_York", dt.datetime(2026, 6, 10, 12, tzinfo=UTC)),  # EDT, -04:00
    ("Asia/Kolkata", dt.datetime(2026, 6, 10, 2, 30, tzinfo=UTC)),  # +05:30
    ("Pacific/Chatham", dt.datetime(2026, 6, 9, 19, 15, tzinfo=UTC)),  # +12:45
]


@pytest.mark.parametrize(("tz", "start"), ZONES)
def test_a_window_is_open_from_its_start_to_just_before_its_end(
    tz: str, start: dt.datetime
) -> None:
    spec = scaling(window(tz=tz))
    end = start + dt.timedelta(hours=10)
    assert floor_at(spec, start - US) == Floor(1, ())
    assert floor_at(spec, start) == Floor(4, ("w",))
    assert floor_at(spec, end - US) == Floor(4, ("w",))
    assert floor_at(spec, end) == Floor(1, ())
    assert floor_at(spec, end + US) == Floor(1, ())


@pytest.mark.parametrize(("tz", "start"), ZONES)
def test_next_change_is_the_next_boundary_and_never_now(tz: str, start: dt.datetime) -> None:
    spec = scaling(window(tz=tz))
    end = start + dt.timedelta(hours=10)
    tomorrow = start + dt.timedelta(days=1)
    assert next_change(spec, start - dt.timedelta(hours=1)) == start
    assert next_change(spec, start - US) == start
    assert next_change(spec, start) == end
    assert next_change(spec, end - US) == end
    assert next_change(spec, end) == tomorrow
    assert next_change(spec, end + US) == tomorrow


@pytest.mark.parametrize(("tz", "start"), ZONES)
def test_the_answer_does_not_depend_on_the_zone_now_is_given_in(
    tz: str, start: dt.datetime
) -> None:
    spec = scaling(window(tz=tz))
    end = start + dt.timedelta(hours=10)
    for zone in ("UTC", "Asia/Tokyo", "America/Los_Angeles", tz):
        for moment in (start - US, start, end - US, end):
            local = moment.astimezone(ZoneInfo(zone))
            assert floor_at(spec, local) == floor_at(spec, moment)
            assert next_change(spec, local) == next_change(spec, moment)


def test_a_window_that_reopens_as_it_closes_stays_open() -> None:
    """Back to back: every 5 minutes for 5 minutes. The floor never drops, and the next
    change is the next boundary, never the current one."""
    spec = scaling(window(start="*/5 * * * *", duration="5m"))
    boundary = dt.datetime(2026, 6, 10, 9, 5, tzinfo=UTC)
    for moment in (boundary - US, boundary, boundary + US):
        assert floor_at(spec, moment) == Floor(4, ("w",))
    assert next_change(spec, boundary - US) == boundary
    assert next_change(spec, boundary) == boundary + dt.timedelta(minutes=5)


def test_a_one_second_window() -> None:
    spec = scaling(window(start="59 23 * * *", duration="1s"))
    start = dt.datetime(2026, 6, 10, 23, 59, tzinfo=UTC)
    assert not is_open(spec.schedules[0], start - US)
    assert is_open(spec.schedules[0], start)
    assert is_open(spec.schedules[0], start + dt.timedelta(seconds=1) - US)
    assert not is_open(spec.schedules[0], start + dt.timedelta(seconds=1))
    assert next_change(spec, start) == start + dt.timedelta(seconds=1)


def test_overlapping_windows_raise_the_floor_to_the_highest() -> None:
    spec = scaling(
        window("day", start="0 8 * * *", duration="10h", floor=3),
        window("peak", start="0 12 * * *", duration="2h", floor=6),
        min_replicas=2,
    )
    noon = dt.datetime(2026, 6, 10, 12, tzinfo=UTC)
    assert floor_at(spec, noon - US) == Floor(3, ("day",))
    assert floor_at(spec, noon) == Floor(6, ("day", "peak"))
    assert floor_at(spec, noon + dt.timedelta(hours=2)) == Floor(3, ("day",))
    assert next_change(spec, noon - dt.timedelta(hours=1)) == noon
    assert next_change(spec, noon) == noon + dt.timedelta(hours=2)
    assert next_change(spec, noon + dt.timedelta(hours=2)) == noon + dt.timedelta(hours=6)
    # A window's floor below minReplicas changes nothing.
    low = scaling(window(floor=1), min_replicas=2)
    assert floor_at(low, noon) == Floor(2, ("w",))


def test_a_window_longer_than_its_period_is_open_throughout() -> None:
    spec = scaling(window(start="0 * * * *", duration="2h"))
    hour = dt.datetime(2026, 6, 10, 9, tzinfo=UTC)
    assert floor_at(spec, hour - US).min_replicas == 4
    assert floor_at(spec, hour).min_replicas == 4
    # The next change is the next start (which keeps it open), not an end.
    assert next_change(spec, hour) == hour + dt.timedelta(hours=1)


def test_without_windows_there_is_no_next_change() -> None:
    assert next_change(scaling(), dt.datetime(2026, 6, 10, tzinfo=UTC)) is None
    assert floor_at(scaling(min_replicas=3), dt.datetime(2026, 6, 10, tzinfo=UTC)) == Floor(3, ())


def test_a_floor_is_a_value() -> None:
    floor = Floor(2, ("w",))
    with pytest.raises(dataclasses.FrozenInstanceError):
        floor.min_replicas = 3  # type: ignore[misc]
    assert len({floor, Floor(2, ("w",))}) == 1
