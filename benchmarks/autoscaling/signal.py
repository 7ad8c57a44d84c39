"""How the signal Shoal's HPA scales on moves with load: one replica, steady Poisson load.

Shoal's HPA targets Triton's pending request count per replica. Whether a target is
reachable, and how noisy one scrape of it is, follows from the batcher: the count
excludes the batch being executed, so it stays near half a batch until the replica
saturates. This curve, from the same replica model the replay uses, is what the
results' analysis refers to.
"""

from __future__ import annotations

import numpy as np

from benchmarks.autoscaling.replica import BatcherConfig, Replica

LOADS = (0.2, 0.4, 0.6, 0.8, 0.9, 0.95, 0.99)


def pending_curve(
    batcher: BatcherConfig, seconds: int = 120, seed: int = 1
) -> list[dict[str, float]]:
    """Mean and standard deviation of the pending count sampled once a second, and the
    P95 latency, at fractions of the full-batch throughput."""
    full = batcher.max_batch / (batcher.base_s + batcher.per_item_s * batcher.max_batch)
    rows = []
    for load in LOADS:
        rng = np.random.default_rng(seed)
        arrivals = np.sort(rng.uniform(0.0, seconds, rng.poisson(load * full * seconds)))
        bounds = np.searchsorted(arrivals, np.arange(seconds + 1, dtype=np.float64))
        replica = Replica(batcher)
        pending, latencies = [], []
        for t in range(seconds):
            step = replica.advance(arrivals[bounds[t] : bounds[t + 1]].tolist(), t, t + 1)
            pending.append(step.pending)
            if step.sizes:
                latencies.append(np.repeat(step.ends, step.sizes) - np.array(step.started))
        sampled = np.array(pending[10:], dtype=np.float64)  # after a warm-up
        rows.append(
            {
                "load": load,
                "rate_per_s": round(load * full, 1),
                "mean_pending": round(float(sampled.mean()), 1),
                "sd_pending": round(float(sampled.std()), 1),
                "p95_ms": round(float(np.percentile(np.concatenate(latencies), 95)) * 1000, 1),
            }
        )
    return rows
