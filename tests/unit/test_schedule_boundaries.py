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


# ------------------------------------------------------------------ clock changes

PARIS = ZoneInfo("Europe/Paris")
HOUR = dt.timedelta(hours=1)


def test_a_start_the_clocks_pass_twice_opens_once_for_its_duration() -> None:
    """2026-10-25: Paris goes back from 03:00 CEST to 02:00 CET, so 02:30 shows twice."""
    spec = scaling(window(start="30 2 * * *", duration="1h", tz="Europe/Paris"))
    start = dt.datetime(2026, 10, 25, 0, 30, tzinfo=UTC)  # 02:30 CEST, the first one
    assert floor_at(spec, start - US).min_replicas == 1
    assert floor_at(spec, start).min_replicas == 4
    # 02:29:59 CET: the wall clock is back before the start, the hour is not over.
    assert floor_at(spec, start + HOUR - US).min_replicas == 4
    # 02:30 CET: closed, not opened a second time.
    assert floor_at(spec, start + HOUR).min_replicas == 1
    assert next_change(spec, start) == start + HOUR
    assert next_change(spec, start + HOUR) == dt.datetime(2026, 10, 26, 1, 30, tzinfo=UTC)


def test_no_opening_is_missed_in_the_hour_that_repeats() -> None:
    """Moments of one zone compare by wall time: 02:30 CET (the later) is not before
    02:50 CEST (the earlier). The next change must be the earlier instant."""
    spec = scaling(
        window("a", start="30 2 * * *", duration="1h", tz="Europe/Paris", floor=3),
        window("b", start="50 2 * * *", duration="5m", tz="Europe/Paris", floor=5),
    )
    now = dt.datetime(2026, 10, 25, 0, 40, tzinfo=UTC)  # 02:40 CEST
    b_opens = dt.datetime(2026, 10, 25, 0, 50, tzinfo=UTC)  # 02:50 CEST
    assert next_change(spec, now) == b_opens
    assert floor_at(spec, b_opens) == Floor(5, ("a", "b"))
    assert next_change(spec, b_opens) == b_opens + dt.timedelta(minutes=5)


def test_now_in_the_windows_own_zone_during_the_repeated_hour() -> None:
    spec = scaling(window(start="30 2 * * *", duration="1h", tz="Europe/Paris"))
    for minute in (0, 29, 30, 45):
        first = dt.datetime(2026, 10, 25, 2, minute, tzinfo=PARIS)  # CEST
        second = dt.datetime(2026, 10, 25, 2, minute, tzinfo=PARIS, fold=1)  # CET
        for local in (first, second):
            utc = local.astimezone(UTC)
            assert floor_at(spec, local) == floor_at(spec, utc)
            assert next_change(spec, local) == next_change(spec, utc)
    assert floor_at(spec, dt.datetime(2026, 10, 25, 2, 45, tzinfo=PARIS)).min_replicas == 4
    assert floor_at(spec, dt.datetime(2026, 10, 25, 2, 45, tzinfo=PARIS, fold=1)).min_replicas == 1


def test_a_start_the_clocks_skip_opens_as_if_they_had_not_moved() -> None:
    """2026-03-29: Paris jumps from 02:00 CET to 03:00 CEST; 02:30 never shows, and
    reads as 03:30 CEST (as Go's time.Date and Python read it)."""
    spec = scaling(window(start="30 2 * * *", duration="1h", tz="Europe/Paris"))
    opens = dt.datetime(2026, 3, 29, 1, 30, tzinfo=UTC)
    assert next_change(spec, dt.datetime(2026, 3, 29, 0, 0, tzinfo=UTC)) == opens
    assert floor_at(spec, opens - US).min_replicas == 1
    assert floor_at(spec, opens).min_replicas == 4
    assert next_change(spec, opens) == opens + HOUR
    assert floor_at(spec, opens + HOUR).min_replicas == 1


@pytest.mark.parametrize(
    "opens",
    [
        dt.datetime(2026, 10, 24, 20, tzinfo=UTC),  # 22:00 CEST; the clocks go back at 03:00
        dt.datetime(2026, 3, 28, 21, tzinfo=UTC),  # 22:00 CET; they go forward at 02:00
    ],
)
def test_a_window_across_a_clock_change_lasts_its_duration(opens: dt.datetime) -> None:
    spec = scaling(window(start="0 22 * * *", duration="10h", tz="Europe/Paris"))
    closes = opens + dt.timedelta(hours=10)
    assert floor_at(spec, opens).min_replicas == 4
    assert next_change(spec, opens) == closes
    assert floor_at(spec, closes - US).min_replicas == 4
    assert floor_at(spec, closes).min_replicas == 1


@pytest.mark.parametrize(
    ("tz", "day"),
    [
        ("Europe/Paris", dt.date(2026, 10, 25)),
        ("Europe/Paris", dt.date(2026, 3, 29)),
        ("America/New_York", dt.date(2026, 11, 1)),
        ("America/New_York", dt.date(2026, 3, 8)),
        ("Australia/Lord_Howe", dt.date(2026, 4, 5)),  # back by 30 minutes
        ("Australia/Lord_Howe", dt.date(2026, 10, 4)),
        ("Antarctica/Troll", dt.date(2026, 10, 25)),  # back by two hours
        ("Antarctica/Troll", dt.date(2026, 3, 29)),
    ],
)
@pytest.mark.parametrize(
    ("start", "duration"),
    [("30 2 * * *", "1h"), ("*/20 1-3 * * *", "30m"), ("0 22 * * *", "10h"), ("0 1 * * *", "1s")],
)
def test_the_floor_holds_until_the_next_change_across_clock_changes(
    tz: str, day: dt.date, start: str, duration: str
) -> None:
    """From a day before the change to a day after, boundary to boundary: next_change
    is after now, and the floor is the same everywhere before it."""
    spec = scaling(window(start=start, duration=duration, tz=tz))
    now = dt.datetime.combine(day, dt.time(), UTC) - dt.timedelta(days=1)
    until = now + dt.timedelta(days=3)
    while now < until:
        upcoming = next_change(spec, now)
        assert upcoming is not None
        assert upcoming > now
        assert upcoming.utcoffset() == dt.timedelta(0)
        floor = floor_at(spec, now)
        for probe in (now + (upcoming - now) / 2, upcoming - US):
            assert floor_at(spec, probe) == floor, (now, probe, upcoming)
        now = upcoming


def test_starts_out_of_wall_clock_order_in_a_skipped_half_hour() -> None:
    """2026-10-04: Lord Howe jumps from 02:00 (+10:30) to 02:30 (+11:00) at 15:30 UTC.
    02:40 is ten minutes after the jump; the skipped 02:20, read as if the clocks had not
    moved, twenty: the later wall time is the earlier instant, and the search for the
    last and the next start must look past the first one it finds."""
    spec = scaling(window(start="20,40 2 * * *", duration="30m", tz="Australia/Lord_Howe"))
    jump = dt.datetime(2026, 10, 3, 15, 30, tzinfo=UTC)
    minutes = dt.timedelta(minutes=1)
    assert next_change(spec, jump + 5 * minutes) == jump + 10 * minutes  # 02:40 opens
    assert floor_at(spec, jump + 10 * minutes).min_replicas == 4
    assert next_change(spec, jump + 10 * minutes) == jump + 20 * minutes  # 02:20 starts
    # Open until 30 minutes after the later start, not the first one found.
    assert next_change(spec, jump + 25 * minutes) == jump + 50 * minutes
    assert floor_at(spec, jump + 45 * minutes).min_replicas == 4
    assert floor_at(spec, jump + 50 * minutes).min_replicas == 1
