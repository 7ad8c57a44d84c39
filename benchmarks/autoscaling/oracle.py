"""The clairvoyant oracle: the fewest replicas that meet the SLO in each window.

It knows every arrival in advance. For each one-minute window it finds the smallest n
such that n Ready replicas, starting the window with empty queues and sharing its
arrivals round robin, keep the window's P95 under the target: a short upward search
from the bound no replica count can beat (the window's requests at every replica's
full-batch throughput). It then provisions ahead: a replica needed from a window's
start is created one cold start earlier, and the plan never drops below what the
current window or any window starting within the next cold start needs. Queues carried
across a window boundary can make a window slightly worse than it was alone, so the
whole plan is replayed and any window that misses the target gets one more replica,
until none does (or a few rounds pass).

It is a lower bound on cost for autoscalers that can only change the replica count
each minute; it is not a bound for one that changes it within a minute.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import numpy.typing as npt

from benchmarks.autoscaling.replica import BatcherConfig, Replica
from benchmarks.autoscaling.workload import WINDOW_S, Workload


def window_p95_with(
    arrivals: npt.NDArray[np.float64], replicas: int, batcher: BatcherConfig, start: float
) -> float:
    """P95 latency of one window's arrivals on ``replicas`` empty replicas, round robin."""
    if arrivals.size == 0:
        return 0.0
    pods = [Replica(batcher, start) for _ in range(replicas)]
    latencies: list[npt.NDArray[np.float64]] = []
    t = start
    end = start + WINDOW_S
    bounds = np.searchsorted(arrivals, np.arange(start, end + 1.0))
    rr = 0
    step = 0
    while True:
        lo, hi = (bounds[step], bounds[step + 1]) if t < end else (arrivals.size, arrivals.size)
        chunk = arrivals[lo:hi]
        for j, pod in enumerate(pods):
            s = pod.advance(chunk[(j - rr) % replicas :: replicas].tolist(), t, t + 1.0)
            if s.sizes:
                latencies.append(np.repeat(np.array(s.ends), s.sizes) - np.array(s.started))
        rr = (rr + chunk.size) % replicas
        t += 1.0
        step += 1
        if t >= end and all(p.idle_at(t) for p in pods):
            break
    return float(np.percentile(np.concatenate(latencies), 95))


def replicas_for_window(
    arrivals: npt.NDArray[np.float64],
    batcher: BatcherConfig,
    target_s: float,
    start: float,
    floor: int = 1,
    ceiling: int = 256,
) -> int:
    """The smallest replica count that keeps this window's P95 at most ``target_s``."""
    full = batcher.max_batch / (batcher.base_s + batcher.per_item_s * batcher.max_batch)
    n = max(floor, math.ceil(arrivals.size / WINDOW_S / full))
    while n < ceiling and window_p95_with(arrivals, n, batcher, start) > target_s:
        n += 1
    return n


def provision_plan(per_window: list[int], cold_start_s: float, horizon_s: float) -> list[int]:
    """Replicas to have at each second: the current window's need, and the needs of
    windows starting within one cold start, so their replicas are Ready on time."""
    seconds = round(horizon_s)
    plan = []
    for t in range(seconds):
        w = int(t // WINDOW_S)
        need = per_window[w]
        for ahead, n in enumerate(per_window[w + 1 :], start=w + 1):
            if ahead * WINDOW_S - t > cold_start_s:
                break
            need = max(need, n)
        plan.append(need)
    return plan


def oracle_windows(workload: Workload, batcher: BatcherConfig, target_s: float) -> list[int]:
    """Each window's replica need, windows taken alone."""
    arrivals = workload.arrivals
    edges = np.searchsorted(arrivals, np.arange(workload.windows + 1) * WINDOW_S)
    return [
        replicas_for_window(arrivals[edges[w] : edges[w + 1]], batcher, target_s, w * WINDOW_S)
        for w in range(workload.windows)
    ]


def refine(
    per_window: list[int],
    replay: Callable[[list[int]], tuple[tuple[bool, ...], object]],
    rounds: int = 4,
) -> tuple[list[int], object]:
    """Add a replica to every window the replay finds out of SLO, until none is."""
    plan = list(per_window)
    in_slo, result = replay(plan)
    for _ in range(rounds):
        if all(in_slo):
            break
        plan = [n + (0 if ok else 1) for n, ok in zip(plan, in_slo, strict=True)]
        in_slo, result = replay(plan)
    return plan, result
