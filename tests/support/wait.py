"""Waiting for the world to converge, and saying what it looked like when it did not."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


class ConditionTimeoutError(AssertionError):
    """Raised with the last observation when a condition never held."""


def wait_for(
    description: str,
    observe: Callable[[], T],
    condition: Callable[[T], bool],
    *,
    timeout: float = 60.0,
    interval: float = 0.5,
) -> T:
    """Poll ``observe()`` until ``condition(observation)`` holds; return that observation.

    On timeout the assertion names what was awaited and shows the last thing observed
    (or the last error raised while observing), so a red test explains itself.
    """
    deadline = time.monotonic() + timeout
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
        time.sleep(interval)
