"""Two gateway replicas, peered, on the real engine: one tenant's rate limit holds for
the sum of both replicas' traffic, and its concurrency cap for the sum of their
in-flight requests. How close the sum comes to the limit, and the replication delay,
are figures of ``python -m benchmarks.gateway``."""

from __future__ import annotations

import json
from pathlib import Path

from e2e import gateway_scenarios as scenarios


def test_two_replicas_enforce_one_limit_together(tmp_path: Path) -> None:
    f = scenarios.replicas(tmp_path, limit=100, offered_per_replica=150.0, seconds=10.0)
    print(json.dumps(f, indent=1))
    # 300 offered, 100 a second allowed (plus a tenth of the burst) for the sum of both:
    # two replicas counting apart would admit twice that.
    assert 0.75 <= f["admitted_rps_total"] / f["allowed_rps"] <= 1.25, f
    assert all(rps > 0 for rps in f["admitted_rps_per_replica"])
    # Concurrency 4 shared by two replicas: never more than 4 in the model at once; of
    # 12 requests of 500 ms, those that waited past the queue timeout got 429.
    assert f["peak_in_flight_both_replicas"] <= f["concurrency_cap"]
    assert set(f["slow_statuses"]) <= {"200", "429"}
    assert f["slow_statuses"].get("429", 0) > 0
