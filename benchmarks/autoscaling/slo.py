"""Scoring a run: per-window P95, attainment, violations, reversals.

The SLO is the one the batching benchmark optimises for: P95 latency under its target.
A one-minute window is in SLO when the P95 latency of the requests that *arrived* in it
is at most the target; attainment is the share of windows in SLO, and minutes in
violation are the windows out of it. A scale reversal is a change of direction in the
replica count the autoscaler sets (up then down, or down then up): the churn that costs
cold starts and drains.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt


@dataclass(frozen=True)
class WindowScore:
    p95_s: tuple[float, ...]
    requests: tuple[int, ...]
    target_s: float

    @property
    def in_slo(self) -> tuple[bool, ...]:
        return tuple(p <= self.target_s for p in self.p95_s)

    @property
    def attainment(self) -> float:
        return sum(self.in_slo) / len(self.p95_s) if self.p95_s else 1.0

    @property
    def violation_minutes(self) -> int:
        return len(self.p95_s) - sum(self.in_slo)


def window_p95(latencies: list[npt.NDArray[np.float64]]) -> float:
    """P95 of one window's latencies (numpy's linear interpolation); 0 if empty.

    A window can hold no arrays (an idle minute) or only empty ones (an idle minute
    between two busy ones whose requests shared a batch); either way it served no
    request, so it is in SLO.
    """
    values = np.concatenate(latencies) if latencies else np.empty(0)
    if values.size == 0:
        return 0.0
    return float(np.percentile(values, 95))


def score_windows(per_window: list[list[npt.NDArray[np.float64]]], target_s: float) -> WindowScore:
    return WindowScore(
        p95_s=tuple(window_p95(w) for w in per_window),
        requests=tuple(int(sum(a.size for a in w)) for w in per_window),
        target_s=target_s,
    )


def reversals(history: list[tuple[float, int]]) -> int:
    """Direction changes in a sequence of (time, replicas) settings."""
    count = 0
    last_direction = 0
    previous = history[0][1] if history else 0
    for _, replicas in history[1:]:
        if replicas == previous:
            continue
        direction = 1 if replicas > previous else -1
        if last_direction and direction != last_direction:
            count += 1
        last_direction = direction
        previous = replicas
    return count
