"""Time windows: a cron start, a duration and a time zone. A model's scheduled warm-pool
floors and a pool gateway's time-window limits are both windows."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from shoal.api.common import DnsLabel, DurationFormat, SpecModel
from shoal.api.formats import CronSchedule, TimeZone

# Longer than a month would outlast a monthly schedule; zero would never open.
WindowDuration = Annotated[str, DurationFormat("1s", "744h", example="10h")]


class Window(SpecModel):
    """A window that opens at each time its cron expression names, for a duration."""

    name: DnsLabel = Field(description="Names the window in status and Events.")
    start: CronSchedule = Field(
        description="When the window opens, as a five-field cron expression, e.g. '0 8 * * 1-5'."
    )
    duration: WindowDuration = Field(description="How long the window stays open, e.g. 10h.")
    time_zone: TimeZone = Field(
        default="UTC", description="IANA time zone of start, e.g. Europe/Paris."
    )
