"""Time windows (scheduled warm-pool floors, a gateway's time-window limits): which are
open at a moment, and when the next one opens or closes (pure functions of the spec and
a time)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass
from zoneinfo import ZoneInfo

from croniter import croniter

from shoal.api.common import parse_duration
from shoal.api.inferencemodel import Scaling
from shoal.api.windows import Window


@dataclass(frozen=True)
class Floor:
    """The warm pool at a moment, and the windows that raised it."""

    min_replicas: int
    open_windows: tuple[str, ...]


def _last_start(window: Window, now: dt.datetime) -> dt.datetime:
    local = now.astimezone(ZoneInfo(window.time_zone))
    # A start exactly at ``now`` counts: step a microsecond ahead before looking back.
    previous: dt.datetime = croniter(window.start, local + dt.timedelta(microseconds=1)).get_prev(
        dt.datetime
    )
    return previous


def is_open(window: Window, now: dt.datetime) -> bool:
    start = _last_start(window, now)
    return now < start + dt.timedelta(seconds=parse_duration(window.duration))


def floor_at(scaling: Scaling, now: dt.datetime) -> Floor:
    open_windows = [w for w in scaling.schedules if is_open(w, now)]
    floor = max([scaling.min_replicas, *(w.min_replicas for w in open_windows)])
    return Floor(floor, tuple(w.name for w in open_windows))


def next_change(scaling: Scaling, now: dt.datetime) -> dt.datetime | None:
    """The next moment one of the model's scheduled windows opens or closes."""
    return next_window_change(scaling.schedules, now)


def next_window_change(windows: Sequence[Window], now: dt.datetime) -> dt.datetime | None:
    """The next moment a window opens or closes, if there are windows."""
    moments = []
    for window in windows:
        local = now.astimezone(ZoneInfo(window.time_zone))
        upcoming: dt.datetime = croniter(window.start, local).get_next(dt.datetime)
        moments.append(upcoming)
        end = _last_start(window, now) + dt.timedelta(seconds=parse_duration(window.duration))
        if end > now:
            moments.append(end)
    return min(moments) if moments else None
