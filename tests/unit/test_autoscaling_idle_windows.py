"""The replay survives traces with idle minutes.

Real traces have minutes without a request. Such a window, or one that only received an
empty slice of latencies (a batch whose requests arrived before and after it), is in
SLO with zero requests; scoring must not fail on it.
"""

from __future__ import annotations

import numpy as np
from benchmarks.autoscaling.cluster import PodTiming
from benchmarks.autoscaling.replica import BatcherConfig
from benchmarks.autoscaling.scalers import ScheduleScaler
from benchmarks.autoscaling.simulate import SimConfig, simulate
from benchmarks.autoscaling.slo import score_windows, window_p95
from benchmarks.autoscaling.workload import Workload

BATCHER = BatcherConfig(max_batch=8, max_queue_delay_s=0.002, base_s=0.020, per_item_s=0.001)


def test_an_empty_window_is_in_slo_with_no_requests() -> None:
    empty = np.array([], dtype=np.float64)
    assert window_p95([empty, empty]) == 0.0
    score = score_windows([[empty], [], [np.array([0.1, 0.2])]], target_s=0.15)
    assert score.requests == (0, 0, 2)
    assert score.in_slo == (True, True, False)
    assert score.attainment == 2 / 3


def test_a_replay_with_idle_minutes_scores_every_window() -> None:
    # Minute 0 overloads the one replica for three minutes, so batches started in minute
    # 2 mix its requests with minute 2's own, and idle minute 1 lies between them.
    rng = np.random.default_rng(7)
    busy = [np.sort(rng.uniform(s, s + 60.0, n)) for s, n in ((0.0, 50_000), (120.0, 600))]
    workload = Workload("idle", np.concatenate(busy), 300.0, {})
    config = SimConfig(BATCHER, PodTiming(10.0, 5.0), initial_replicas=1, slo_target_s=1.0)
    result = simulate(workload, ScheduleScaler("fixed", [1] * 300), config)
    assert result.score.requests == (50_000, 0, 600, 0, 0)
    assert result.score.in_slo[1:] == (True, False, True, True)
