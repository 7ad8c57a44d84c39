"""Priority lanes at the edge, on the real engine, at twice a route's capacity: the top
lane keeps its latency, the low lane is shed at once (503) rather than left to time
out."""

from __future__ import annotations

import json
from pathlib import Path

from e2e import gateway_scenarios as scenarios


def test_under_2x_overload_the_top_lane_keeps_its_latency(tmp_path: Path) -> None:
    f = scenarios.priority(tmp_path, seconds=7.0)
    print(json.dumps(f, indent=1))
    assert f["high_errors"] == 0
    assert f["high_gateway_p95_ratio"] <= 1.5
    assert f["high_p95_ratio"] <= 1.5
    assert f["high_loaded_queue_p95_ms"] <= f["capacity_rps"]  # (ms) it hardly queues
    # The low lane: shed, fast, and nothing of it timed out or failed otherwise.
    assert f["low_shed"] > 0
    # Each shed request was refused by the route itself before it entered the queue...
    assert f["low_shed_logged_on_route"] == f["low_shed"]
    assert f["low_shed_queued_on_route"] == 0
    assert f["low_shed_route_p95_ms"] <= 5.0
    assert f["low_shed_p50_ms"] <= 5.0
    # ...so at the edge it took well under the one service time a queued request waits
    # for a slot. (The 5 ms target at the edge's P95 is the gateway benchmark's, on a
    # quiet machine: here the local cluster shares the two cores.)
    assert f["low_shed_gateway_p95_ms"] < f["service_ms"] / 2
    assert f["low_timeouts_or_errors"] == 0
    assert f["exporter_denied_on_route"] == float(f["low_shed"])
