"""Scheduled warm-pool floors open and close on time, in the window's time zone."""

from __future__ import annotations

import datetime as dt

from shoal.api.inferencemodel import Scaling
from shoal.render.schedule import floor_at, next_change

SCALING = Scaling.model_validate(
    {
        "minReplicas": 2,
        "maxReplicas": 8,
        "schedules": [
            {
                "name": "business-hours",
                "start": "0 8 * * 1-5",
                "duration": "10h",
                "timeZone": "Europe/Paris",
                "minReplicas": 5,
            }
        ],
    }
)


def at(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text)


def test_floor_is_raised_only_inside_the_window() -> None:
    # Monday 2026-11-30: 08:00 in Paris is 07:00 UTC.
    assert floor_at(SCALING, at("2026-11-30T06:59:00+00:00")).min_replicas == 2
    opened = floor_at(SCALING, at("2026-11-30T07:00:00+00:00"))
    assert opened.min_replicas == 5
    assert opened.open_windows == ("business-hours",)
    assert floor_at(SCALING, at("2026-11-30T16:59:59+00:00")).min_replicas == 5
    assert floor_at(SCALING, at("2026-11-30T17:00:00+00:00")).min_replicas == 2
    # Saturday: no window.
    assert floor_at(SCALING, at("2026-12-05T09:00:00+00:00")).min_replicas == 2


def test_next_change_is_the_next_boundary() -> None:
    assert next_change(SCALING, at("2026-11-30T06:00:00+00:00")) == at("2026-11-30T07:00:00+00:00")
    assert next_change(SCALING, at("2026-11-30T12:00:00+00:00")) == at("2026-11-30T17:00:00+00:00")
    assert next_change(Scaling(), at("2026-11-30T12:00:00+00:00")) is None
