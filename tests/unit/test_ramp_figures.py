"""The ramp benchmark's figures: the load it offers and what it reads from a run."""

from __future__ import annotations

import math
from typing import Any

import pytest
from benchmarks.ramp import (
    SCALERS,
    RampPlan,
    Sample,
    arrivals,
    demand_exceeds_at,
    first_reach,
    hpa_figures,
    latency_figures,
    model_figures,
    percentile,
    ramp_lines,
    replica_seconds,
    replicas_needed,
    timeline,
)
from kubernetes import client

from shoal.render.autoscaler import QUEUE_METRIC, REQUIRED_REPLICAS_METRIC

PLAN = RampPlan(low_rps=5, peak_rps=70, ramp_s=150, hold_s=60)


def _samples(*points: tuple[float, int]) -> list[Sample]:
    return [Sample(t, replicas, replicas, None, None) for t, replicas in points]


def test_the_offered_rate_rises_linearly_then_holds_then_stops() -> None:
    assert PLAN.rate(-30) == 5
    assert PLAN.rate(0) == 5
    assert PLAN.rate(75) == pytest.approx(37.5)
    assert PLAN.rate(150) == 70
    assert PLAN.rate(209) == 70
    assert PLAN.rate(210) == 0


def test_arrivals_follow_the_rate_and_repeat_with_their_seed() -> None:
    sent = arrivals(PLAN.rate, PLAN.peak_rps, 0, PLAN.end_s, seed=1)
    assert sent == arrivals(PLAN.rate, PLAN.peak_rps, 0, PLAN.end_s, seed=1)
    assert sent != arrivals(PLAN.rate, PLAN.peak_rps, 0, PLAN.end_s, seed=2)
    assert sent == sorted(sent)
    assert sent[0] >= 0
    assert sent[-1] < PLAN.end_s
    expected = (5 + 70) / 2 * 150 + 70 * 60  # the integral of the rate: 9,825
    assert abs(len(sent) - expected) < 4 * math.sqrt(expected)
    # The rate rises: the last 30 s of the ramp hold far more than its first 30 s.
    early = sum(1 for t in sent if t < 30)
    late = sum(1 for t in sent if 120 <= t < 150)
    assert late > 4 * early


def test_enough_replicas_cover_the_peak_at_the_measured_capacity() -> None:
    assert replicas_needed(70, 28.3) == 3
    assert replicas_needed(70, 35) == 2  # exactly two replicas' worth
    assert replicas_needed(70, 35.0000001) == 2
    assert replicas_needed(70, 34.9) == 3
    assert replicas_needed(1, 100) == 1
    with pytest.raises(ValueError, match="positive"):
        replicas_needed(70, 0)


def test_demand_needs_a_rate_once_the_ramp_passes_it() -> None:
    assert demand_exceeds_at(PLAN, 37.5) == pytest.approx(75)
    assert demand_exceeds_at(PLAN, 2) == 0
    assert demand_exceeds_at(PLAN, 70) is None
    assert demand_exceeds_at(PLAN, 100) is None


def test_time_to_enough_counts_from_the_ramp_start() -> None:
    samples = _samples((-10, 1), (0, 1), (40, 2), (61, 3), (80, 4))
    assert first_reach(samples, 3) == 61
    assert first_reach(samples, 2) == 40
    assert first_reach(samples, 5) is None
    # Already there when the ramp started: no time at all.
    assert first_reach(_samples((-20, 1), (-5, 3), (1, 3)), 3) == 0
    # There once during the warm-up but not at the start: the first time after it.
    assert first_reach(_samples((-20, 3), (-5, 1), (12, 3)), 3) == 12


def test_time_to_enough_serving_reads_the_answering_servers() -> None:
    samples = [Sample(0, 1, 1, None, None), Sample(30, 3, 1, None, None)]
    samples.append(Sample(42, 3, 3, None, None))
    assert first_reach(samples, 3) == 30
    assert first_reach(samples, 3, "serving") == 42


def test_replica_seconds_hold_each_count_until_the_next_sample() -> None:
    samples = _samples((-10, 1), (10, 2), (20, 4))
    assert replica_seconds(samples, 0, 30) == 1 * 10 + 2 * 10 + 4 * 10
    assert replica_seconds(samples, 15, 25) == 2 * 5 + 4 * 5


def test_percentile_is_an_observed_value_by_nearest_rank() -> None:
    values = [float(v) for v in range(1, 101)]
    assert percentile(values, 95) == 95
    assert percentile(values, 50) == 50
    assert percentile(reversed(values), 100) == 100
    assert percentile([3.0], 95) == 3
    assert percentile([], 95) is None


def test_latency_figures_leave_failures_out_of_the_percentiles() -> None:
    records = [(float(t), 0.1, True) for t in range(19)] + [(19.0, 9.0, False)]
    records.append((25.0, 5.0, True))  # outside the window
    figures = latency_figures(records, 0, 20)
    assert figures == {"requests": 20, "failed": 1, "p50_ms": 100.0, "p95_ms": 100.0}


def test_the_timeline_keeps_changes_only() -> None:
    samples = [Sample(t, r, s, None, None) for t, r, s in [(0, 1, 1), (1, 1, 1), (2, 2, 1)]]
    samples.append(Sample(5, 2, 2, None, None))
    assert timeline(samples) == [[0, 1, 1], [2, 2, 1], [5, 2, 2]]


def test_the_published_required_replicas_are_the_per_replica_reading_times_replicas() -> None:
    service = client.V2CrossVersionObjectReference(api_version="v1", kind="Service", name="m")
    required = client.V2ObjectMetricStatus(
        current=client.V2MetricValueStatus(average_value="750m"),
        described_object=service,
        metric=client.V2MetricIdentifier(name=REQUIRED_REPLICAS_METRIC),
    )
    queue = client.V2PodsMetricStatus(
        current=client.V2MetricValueStatus(average_value="2500m"),
        metric=client.V2MetricIdentifier(name=QUEUE_METRIC),
    )
    status = client.V2HorizontalPodAutoscalerStatus(
        current_replicas=4,
        desired_replicas=4,
        current_metrics=[
            client.V2MetricStatus(type="Object", object=required),
            client.V2MetricStatus(type="Pods", pods=queue),
        ],
    )
    spec = client.V2HorizontalPodAutoscalerSpec(
        max_replicas=4,
        scale_target_ref=client.V2CrossVersionObjectReference(kind="Deployment", name="m"),
    )
    hpa = client.V2HorizontalPodAutoscaler(spec=spec, status=status)
    assert hpa_figures(hpa) == {"queue": 2.5, "required": 3.0}
    assert hpa_figures(client.V2HorizontalPodAutoscaler(spec=spec)) == {}


def _run() -> dict[str, Any]:
    records = [(t / 10, 0.2, True) for t in range(2100)]
    fast = _samples((-1, 2), (30, 3), (60, 4))
    slow = _samples((-1, 1), (90, 2), (120, 3))
    models = {
        "predictive": model_figures(PLAN, 3, records, fast),
        "queue_depth": model_figures(PLAN, 3, records, slow),
    }
    return {
        "settings": {
            "model": {"base_ms": 100.0, "per_item_ms": 10.0, "max_batch_size": 4},
            "replicas": {"min": 1, "max": 4},
            "target_queue_depth": 1,
            "ramp": {"low_rps": 5.0, "peak_rps": 70.0, "ramp_s": 150.0, "hold_s": 60.0},
        },
        "capacity": {"per_replica_rps": 28.3},
        "enough_replicas": 3,
        "demand_needs_them_at_s": 98.3,
        "models": models,
    }


def test_a_run_renders_one_row_per_scaler() -> None:
    data = _run()
    assert data["models"]["predictive"]["enough_at_s"] == 30
    assert data["models"]["queue_depth"]["enough_at_s"] == 120
    lines = ramp_lines(data)
    rows = [line for line in lines if line.startswith("| queue depth")]
    assert len(rows) == len(SCALERS)
    assert rows[0].startswith("| queue depth + forecast | 2 | 30 | 30 | 200 |")
    assert rows[1].startswith("| queue depth alone | 1 | 120 | 120 | 200 |")
    assert "Enough replicas: 3" in lines[0]
    assert "28.3 req/s" in lines[0]


def test_a_scaler_that_never_got_there_says_so() -> None:
    data = _run()
    data["models"]["queue_depth"] = model_figures(PLAN, 3, [], _samples((-1, 1), (50, 2)))
    row = ramp_lines(data)[-1]
    assert row.startswith("| queue depth alone | 1 | not reached | not reached | - | - |")
