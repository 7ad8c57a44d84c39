"""Waiting for the world to converge, and saying what it looked like when it did not."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

# Without an interval, the first pause between polls; each next one doubles, up to the last.
FIRST_INTERVAL = 0.05
LAST_INTERVAL = 0.5


class ConditionTimeoutError(AssertionError):
    """Raised with the last observation when a condition never held."""


def wait_for(
    description: str,
    observe: Callable[[], T],
    condition: Callable[[T], bool],
    *,
    timeout: float = 60.0,
    interval: float | None = None,
) -> T:
    """Poll ``observe()`` until ``condition(observation)`` holds; return that observation.

    Without ``interval`` the first polls come quickly (from 0.05 s, doubling) and the
    pace settles at 0.5 s: most conditions hold within a fraction of a second, and a
    fixed half-second poll made every one of them cost at least that. An ``interval``
    polls at that fixed pace (a condition that compares one observation with the last
    relies on it).

    On timeout the assertion names what was awaited and shows the last thing observed
    (or the last error raised while observing), so a red test explains itself.
    """
    deadline = time.monotonic() + timeout
    pause = FIRST_INTERVAL if interval is None else interval
    longest = LAST_INTERVAL if interval is None else interval
    observed: object = "<nothing observed yet>"
    while True:
        try:
            value = observe()
            observed = value
            if condition(value):
                return value
        except Exception as exc:
            observed = f"{type(exc).__name__}: {exc}"
        if time.monotonic() >= deadline:
            raise ConditionTimeoutError(
                f"timed out after {timeout:.0f}s waiting for {description}; last observed:\n"
                f"{observed!r}"
            )
        time.sleep(min(pause, max(0.0, deadline - time.monotonic())))
        pause = min(pause * 2, longest)
