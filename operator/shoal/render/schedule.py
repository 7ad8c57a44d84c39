"""Time windows (a model's scheduled warm-pool floors, a pool gateway's time-window
limits): which are open at a moment, and when the next one opens or closes (pure
functions of the spec and a time).

A window's ``start`` is a cron expression on the wall clock of its time zone; each wall
time it matches is one instant: a wall time the clocks pass twice (when they go back) is
its first occurrence, and one they skip (when they go forward) is read as if they had not
moved (02:30 on the night clocks jump from 02:00 to 03:00 is 03:30), as Go's time.Date
and Python read it. A window then stays open for ``duration`` of elapsed time, whatever
the clocks do meanwhile. Every instant is compared, and returned, in UTC: two datetimes
of the same zone compare by wall time alone, which is wrong for the hour that repeats.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass
from zoneinfo import ZoneInfo

from croniter import croniter

from shoal.api.common import parse_duration
from shoal.api.inferencemodel import Scaling
from shoal.api.windows import Window

UTC = dt.UTC
#: More than any change of a zone's offset (DST moves clocks by at most two hours):
#: walking the wall clock this far past a moment passes every start near it.
_SHIFT = dt.timedelta(hours=3)


@dataclass(frozen=True)
class Floor:
    """The warm pool at a moment, and the windows that raised it."""

    min_replicas: int
    open_windows: tuple[str, ...]


def _instant(wall: dt.datetime, zone: ZoneInfo) -> dt.datetime:
    """The instant a naive wall time of ``zone`` stands for (fold 0: the first of a
    repeated time; a skipped time as if the clocks had not moved)."""
    return wall.replace(tzinfo=zone, fold=0).astimezone(UTC)


def _wall(now: dt.datetime, zone: ZoneInfo) -> dt.datetime:
    return now.astimezone(zone).replace(tzinfo=None)


def last_start(window: Window, now: dt.datetime) -> dt.datetime:
    """The latest start at or before ``now``, in UTC."""
    zone = ZoneInfo(window.time_zone)
    now = now.astimezone(UTC)
    # Wall times map to instants in order, except across a skipped hour, where they
    # are out of order by at most _SHIFT: walk back until no earlier one can be later.
    starts = croniter(window.start, _wall(now, zone) + _SHIFT)
    best: dt.datetime | None = None
    while True:
        candidate = _instant(starts.get_prev(dt.datetime), zone)
        if best is not None and candidate + _SHIFT < best:
            return best
        if candidate <= now and (best is None or candidate > best):
            best = candidate


def next_start(window: Window, now: dt.datetime) -> dt.datetime:
    """The earliest start strictly after ``now``, in UTC."""
    zone = ZoneInfo(window.time_zone)
    now = now.astimezone(UTC)
    starts = croniter(window.start, _wall(now, zone) - _SHIFT)
    best: dt.datetime | None = None
    while True:
        candidate = _instant(starts.get_next(dt.datetime), zone)
        if best is not None and candidate - _SHIFT > best:
            return best
        if candidate > now and (best is None or candidate < best):
            best = candidate


def _end(window: Window, now: dt.datetime) -> dt.datetime:
    """When the window that started last, at or before ``now``, closes (UTC)."""
    return last_start(window, now) + dt.timedelta(seconds=parse_duration(window.duration))


def is_open(window: Window, now: dt.datetime) -> bool:
    return now.astimezone(UTC) < _end(window, now)


def floor_at(scaling: Scaling, now: dt.datetime) -> Floor:
    open_windows = [w for w in scaling.schedules if is_open(w, now)]
    floor = max([scaling.min_replicas, *(w.min_replicas for w in open_windows)])
    return Floor(floor, tuple(w.name for w in open_windows))


def raised(floor: Floor, warm_pool: int | None) -> Floor:
    """``floor`` raised to a measured warm pool (predictive scaling's), if larger."""
    if warm_pool is None or warm_pool <= floor.min_replicas:
        return floor
    return Floor(warm_pool, floor.open_windows)


def next_change(scaling: Scaling, now: dt.datetime) -> dt.datetime | None:
    """The next moment one of the model's scheduled windows opens or closes."""
    return next_window_change(scaling.schedules, now)


def next_window_change(windows: Sequence[Window], now: dt.datetime) -> dt.datetime | None:
    """The next moment, strictly after ``now``, a window opens or closes (UTC); None
    without windows."""
    now = now.astimezone(UTC)
    moments = []
    for window in windows:
        moments.append(next_start(window, now))
        end = _end(window, now)
        if end > now:
            moments.append(end)
    return min(moments) if moments else None
