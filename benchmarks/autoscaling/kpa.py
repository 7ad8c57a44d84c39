"""A Knative Pod Autoscaler (KPA) decider, scaling on concurrency.

Follows knative/serving ``pkg/autoscaler/scaling/autoscaler.go`` (``autoscaler.Scale``),
with the defaults of ``pkg/autoscaler/config/config.go`` (``defaultConfig``) and
``config/core/configmaps/autoscaler.yaml`` (read at knative-v1.23):

- target: ``container-concurrency-target-default`` (100) times
  ``container-concurrency-target-percentage`` (70%) concurrent requests per pod;
- stable window 60 s; panic window 10% of it (6 s); panic when the panic-window
  concurrency asks for at least 200% of the ready pods (``panic-threshold-percentage``);
  panic lasts until a whole stable window has passed below the threshold, and never
  scales down;
- one decision every 2 s (``tickInterval``, pkg/autoscaler/scaling/multiscaler.go);
  concurrency is scraped every second into 1 s buckets (``scrapeTickInterval``,
  ``BucketSize``) and averaged over each window (``TimedFloat64Buckets.WindowAverage``);
- at most ``max-scale-up-rate`` (1000) times and at least 1/``max-scale-down-rate`` (2)
  of the ready pods per decision; ``scale-down-delay`` 0.

Not modelled: the activator (requests go straight to pods, round robin), scale to zero
(min scale 1, as for the other scalers), and the scraper's sampling of a subset of pods
(every ready pod is read every second).
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass


@dataclass(frozen=True)
class KpaConfig:
    container_concurrency_target: float = 100.0  # container-concurrency-target-default
    target_utilization: float = 0.70  # container-concurrency-target-percentage
    stable_window_s: int = 60  # stable-window
    panic_window_percentage: float = 10.0  # panic-window-percentage
    panic_threshold_percentage: float = 200.0  # panic-threshold-percentage
    max_scale_up_rate: float = 1000.0  # max-scale-up-rate
    max_scale_down_rate: float = 2.0  # max-scale-down-rate
    tick_s: int = 2  # tickInterval
    min_scale: int = 1
    max_scale: int = 64

    @property
    def target(self) -> float:
        """Concurrent requests per pod to aim for."""
        return self.container_concurrency_target * self.target_utilization

    @property
    def panic_window_s(self) -> int:
        return max(1, round(self.stable_window_s * self.panic_window_percentage / 100))


class KpaDecider:
    """Buckets of observed concurrency and the panic state of one revision."""

    def __init__(self, config: KpaConfig, ready_pods: int, now: float) -> None:
        self.config = config
        self.buckets: deque[float] = deque(maxlen=config.stable_window_s)
        # "We always start in the panic mode, if the deployment is scaled up over 1 pod."
        self.panic_since: float | None = now if ready_pods > 1 else None
        self.max_panic_pods = ready_pods
        self.panicking_ticks = 0

    def record(self, total_concurrency: float) -> None:
        """One second's average concurrency summed over the ready pods."""
        self.buckets.append(total_concurrency)

    def averages(self) -> tuple[float, float]:
        """Stable- and panic-window averages (over the buckets filled so far)."""
        if not self.buckets:
            return 0.0, 0.0
        stable = sum(self.buckets) / len(self.buckets)
        panic_n = min(self.config.panic_window_s, len(self.buckets))
        panic = sum(list(self.buckets)[-panic_n:]) / panic_n
        return stable, panic

    def scale(self, now: float, ready_pods: int) -> int | None:
        """autoscaler.Scale: the desired pod count, or None without data yet."""
        if not self.buckets:
            return None
        cfg = self.config
        stable, panic = self.averages()
        ready = max(1.0, float(ready_pods))
        max_up = math.ceil(cfg.max_scale_up_rate * ready)
        max_down = math.floor(ready / cfg.max_scale_down_rate)
        stable_pods = math.ceil(stable / cfg.target)
        panic_pods = math.ceil(panic / cfg.target)
        desired_stable = int(min(max(stable_pods, max_down), max_up))
        desired_panic = int(min(max(panic_pods, max_down), max_up))
        over_threshold = panic_pods / ready >= cfg.panic_threshold_percentage / 100
        if over_threshold:
            self.panic_since = now  # start panicking, or extend the panic
        elif self.panic_since is not None and self.panic_since + cfg.stable_window_s < now:
            self.panic_since = None
            self.max_panic_pods = 0
        desired = desired_stable
        if self.panic_since is not None:
            self.panicking_ticks += 1
            desired = max(desired, desired_panic)
            if desired > self.max_panic_pods:
                self.max_panic_pods = desired
            desired = self.max_panic_pods  # no scale-down while panicking
        return min(max(desired, cfg.min_scale), cfg.max_scale)
