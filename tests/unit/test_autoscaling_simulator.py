"""The autoscaling replay's parts behave like the systems they model.

The HPA controller model against upstream's rules (tolerance, stabilization, rate
policies, unready and missing pods), the Triton batcher model, the Knative panic mode,
the oracle, the trace and the bookkeeping of a replay.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from benchmarks.autoscaling.calibration import Calibration, CalibrationError, load_calibration
from benchmarks.autoscaling.cluster import Cluster, PodTiming
from benchmarks.autoscaling.experiment import (
    PREDICTIVE,
    PREDICTIVE_SHORT_COOL_DOWN,
    Experiment,
    Settings,
    default_policy,
    scaler_kinds,
)
from benchmarks.autoscaling.hpa import (
    HorizontalPodAutoscaler,
    HpaSpec,
    MetricSnapshot,
    PodInfo,
    ResourceSample,
    parse_quantity,
)
from benchmarks.autoscaling.kpa import KpaConfig, KpaDecider
from benchmarks.autoscaling.oracle import oracle_windows, provision_plan
from benchmarks.autoscaling.pipeline import REQUIRED_METRIC
from benchmarks.autoscaling.replica import BatcherConfig, Replica
from benchmarks.autoscaling.scalers import (
    PredictiveScaler,
    ScheduleScaler,
    representative_model,
    shoal_hpa_spec,
)
from benchmarks.autoscaling.search import Knob, cheapest_passing
from benchmarks.autoscaling.simulate import SimConfig, simulate
from benchmarks.autoscaling.slo import reversals
from benchmarks.autoscaling.workload import (
    Arrivals,
    Workload,
    amplify,
    burst_workload,
    load_trace,
    rate_multiplier,
)
from benchmarks.batching import BASE_MS, PER_ITEM_MS
from e2e.linear_model import linear_model

from shoal.api.common import parse_duration
from shoal.api.inferencemodel import InferenceModel
from shoal.autoscale.signals import forecast_config
from shoal.render.autoscaler import PREDICTIVE_COOL_DOWN

BATCHER = BatcherConfig(max_batch=8, max_queue_delay_s=0.002, base_s=0.020, per_item_s=0.001)
QUEUE = "shoal_queue_depth"
CPU_AT_50 = {
    "minReplicas": 1,
    "maxReplicas": 64,
    "metrics": [
        {
            "type": "Resource",
            "resource": {
                "name": "cpu",
                "target": {"type": "Utilization", "averageUtilization": 50},
            },
        }
    ],
}


def pods(n: int, *, start: float = -600.0) -> list[PodInfo]:
    """n Running, Ready pods, started long ago."""
    return [PodInfo(f"p{i}", "Running", True, start, start + 60, False, 2.0) for i in range(n)]


def queue_metrics(values: list[float]) -> MetricSnapshot:
    return MetricSnapshot(pods={QUEUE: {f"p{i}": v for i, v in enumerate(values)}})


def queue_hpa(behavior: dict[str, Any] | None = None) -> HorizontalPodAutoscaler:
    """An HPA on the queue metric with a target of 10 per pod."""
    target = {"type": "AverageValue", "averageValue": "10"}
    spec: dict[str, Any] = {
        "minReplicas": 1,
        "maxReplicas": 64,
        "metrics": [{"type": "Pods", "pods": {"metric": {"name": QUEUE}, "target": target}}],
    }
    if behavior is not None:
        spec["behavior"] = behavior
    return HorizontalPodAutoscaler(spec)


# The HPA controller.


def test_tolerance_keeps_replicas_within_ten_percent() -> None:
    assert queue_hpa({}).sync(0.0, 4, 4, pods(4), queue_metrics([10.5] * 4)) == 4  # ratio 1.05
    assert queue_hpa({}).sync(0.0, 4, 4, pods(4), queue_metrics([12.0] * 4)) == 5  # ratio 1.2


def test_scale_down_stabilization_holds_the_highest_recommendation_for_300s() -> None:
    hpa = queue_hpa({})  # behavior present: scaleDown window defaults to the controller's 300 s
    assert hpa.sync(0.0, 8, 8, pods(8), queue_metrics([10.0] * 8)) == 8
    current, at = 8, {}
    for t in range(15, 451, 15):
        load = 6.25 if t == 150 else 2.5  # recommends 5 once, else 2
        current = hpa.sync(float(t), current, 8, pods(8), queue_metrics([load] * 8))
        at[t] = current
    assert at[285] == 8  # the t=0 recommendation of 8 is still in the window
    assert at[300] == 5  # it left (upstream keeps samples strictly after now-300s); 5 remains
    assert at[435] == 5
    assert at[450] == 2


def test_scale_up_is_limited_by_the_default_policies_per_period() -> None:
    spec = shoal_hpa_spec(representative_model(20, 1, target_queue_depth=10))
    hpa = HorizontalPodAutoscaler(spec)  # Shoal renders +100% or +4 pods per 15 s, Max
    current, trail = 1, []
    for t in (0, 5, 15, 30, 45, 60):
        load = queue_metrics([500.0] * current)
        current = hpa.sync(float(t), current, current, pods(current), load)
        trail.append(current)
    # max(1 + 4, 2 x 1) = 5; at t=5 the +4 of t=0 is still inside the 15 s period.
    assert trail == [5, 5, 10, 20, 40, 64]


def test_select_policy_min_and_disabled() -> None:
    policies = [
        {"type": "Percent", "value": 100, "periodSeconds": 15},
        {"type": "Pods", "value": 4, "periodSeconds": 15},
    ]
    minimal = queue_hpa({"scaleUp": {"selectPolicy": "Min", "policies": policies}})
    assert minimal.sync(0.0, 1, 1, pods(1), queue_metrics([500.0])) == 2  # min(1+4, 2x1)
    disabled = {"selectPolicy": "Disabled"}
    frozen = queue_hpa({"scaleUp": disabled, "scaleDown": disabled})
    assert frozen.sync(0.0, 3, 3, pods(3), queue_metrics([500.0] * 3)) == 3
    assert frozen.sync(400.0, 3, 3, pods(3), queue_metrics([0.0] * 3)) == 3


def test_without_behavior_scale_up_is_capped_at_double_or_four() -> None:
    hpa = queue_hpa(None)
    assert hpa.sync(0.0, 1, 1, pods(1), queue_metrics([500.0])) == 4
    assert hpa.sync(15.0, 4, 4, pods(4), queue_metrics([500.0] * 4)) == 8


def test_missing_pods_count_at_target_on_scale_down() -> None:
    metrics = queue_metrics([2.0, 2.0, 2.0])  # p3 is Running but has no sample yet
    # Without the rule: ceil(0.2 x 3) = 1. With p3 at the target: ceil(4/10 x 4) = 2.
    assert queue_hpa({}).replicas_for_metrics(400.0, 4, 4, pods(4), metrics) == 2


def test_pending_pods_count_as_idle_on_cpu_scale_up() -> None:
    now = 1000.0
    ready = pods(2)
    busy = {p.name: ResourceSample(2.0, now, 15.0) for p in ready}  # 100% of a 2-core request
    snapshot = MetricSnapshot(resources={"cpu": busy})
    assert HorizontalPodAutoscaler(CPU_AT_50).replicas_for_metrics(now, 2, 2, ready, snapshot) == 4
    starting = [PodInfo(f"n{i}", "Pending", False, now - 10, now - 10, False, 2.0) for i in (0, 1)]
    # Two pods already starting: counted at 0%, usage is 50% of four requests: no change.
    hpa = HorizontalPodAutoscaler(CPU_AT_50)
    assert hpa.replicas_for_metrics(now, 4, 4, ready + starting, snapshot) == 4


def test_cpu_samples_of_a_freshly_ready_pod_are_ignored() -> None:
    now = 1000.0
    old = pods(1)[0]
    fresh = PodInfo("new", "Running", True, now - 70, now - 10, False, 2.0)  # ready 10 s ago
    samples = {old.name: ResourceSample(1.0, now, 15.0), fresh.name: ResourceSample(2.0, now, 15.0)}
    # The fresh pod's window began before it was ready: left out, so only the old pod at 50%.
    snapshot = MetricSnapshot(resources={"cpu": samples})
    hpa = HorizontalPodAutoscaler(CPU_AT_50)
    assert hpa.replicas_for_metrics(now, 2, 2, [old, fresh], snapshot) == 2


def test_shoal_rendered_hpa_is_what_gets_simulated() -> None:
    model = representative_model(20, 1, target_queue_depth=5, target_p95="200ms")
    spec = HpaSpec.parse(shoal_hpa_spec(model))
    assert [(m.source, m.name, m.target) for m in spec.metrics] == [
        ("Pods", QUEUE, 5.0),
        ("Object", "shoal_request_p95_seconds", 0.2),
    ]
    assert spec.scale_up is not None
    assert spec.scale_up.stabilization_s == 0
    assert spec.scale_down is not None
    assert spec.scale_down.stabilization_s == 300
    assert parse_quantity("250m") == 0.25


def test_the_predictive_row_called_default_runs_what_the_operator_ships() -> None:
    """The replay's "Shoal predictive" row is the HPA the operator renders for the same
    model with `predictive: {enabled: true}` (its cool-down included); the 1m cool-down
    it is compared with is its own, labelled row."""
    experiment = Experiment(
        settings=Settings(),
        calibration=Calibration(0.02, 0.001, "test"),
        policy=default_policy(),
        batcher=BATCHER,
        workloads={},
        amplification=1,
    )
    kinds = scaler_kinds(experiment)
    scaling = {"minReplicas": 1, "maxReplicas": 64, "predictive": {"enabled": True}}
    document = linear_model(BASE_MS, PER_ITEM_MS, gpus=1, scaling=scaling)
    shipped = shoal_hpa_spec(InferenceModel.model_validate(document), experiment.policy)

    def replayed(key: str) -> dict[str, Any]:
        spec = kinds[key].spec(0.99)
        assert spec is not None
        return spec

    default, short = replayed(PREDICTIVE), replayed(PREDICTIVE_SHORT_COOL_DOWN)
    assert default["behavior"] == shipped["behavior"]
    # The operator's Object metric on the Service is an External one in the replay, with
    # the same AverageValue 1; the reactive metrics before it are the same.
    required = shipped["metrics"][-1]["object"]["target"]
    assert required == {"type": "AverageValue", "averageValue": "1"}
    assert default["metrics"][-1]["external"]["metric"]["name"] == REQUIRED_METRIC
    assert default["metrics"][-1]["external"]["target"] == required
    assert default["metrics"][:-1] == shipped["metrics"][:-1]
    window = short["behavior"]["scaleDown"]["stabilizationWindowSeconds"]
    assert window == parse_duration(PREDICTIVE_COOL_DOWN)
    assert window != shipped["behavior"]["scaleDown"]["stabilizationWindowSeconds"]
    assert PREDICTIVE_COOL_DOWN in kinds[PREDICTIVE_SHORT_COOL_DOWN].label
    # Each row's predictor credits what its own HPA holds, as the operator's does from
    # the model's scale-down window.
    for key, spec in ((PREDICTIVE, default), (PREDICTIVE_SHORT_COOL_DOWN, short)):
        scaler = kinds[key].make(0.99)
        assert isinstance(scaler, PredictiveScaler)
        held = scaler.forecast_config.cool_down_s
        assert held == spec["behavior"]["scaleDown"]["stabilizationWindowSeconds"]
    assert forecast_config(InferenceModel.model_validate(document), 60.0).cool_down_s == 300


# The replica.


def run_replica(arrivals: list[float], step: float, until: float = 2.0) -> list[tuple[float, int]]:
    replica = Replica(BATCHER)
    out: list[tuple[float, int]] = []
    t = 0.0
    while t < until:
        chunk = [a for a in arrivals if t <= a < t + step]
        s = replica.advance(chunk, t, t + step)
        out.extend(zip(s.ends, s.sizes, strict=True))
        t += step
    return out


def test_batches_are_bounded_by_max_batch_size() -> None:
    burst = [i * 1e-5 for i in range(20)]
    batches = run_replica(burst, 1.0)
    assert [size for _, size in batches] == [8, 8, 4]
    # The first starts when the 8th request arrives, the next when the instance is free.
    first_end = burst[7] + 0.020 + 0.008
    assert batches[0][0] == pytest.approx(first_end)
    assert batches[1][0] == pytest.approx(first_end + 0.028)


def test_the_replica_counts_compute_time_per_request_as_triton_does() -> None:
    # Batches of 8, 8 and 4: Triton adds each batch's time once per request in it.
    replica = Replica(BATCHER)
    replica.advance([i * 1e-5 for i in range(20)], 0.0, 1.0)
    assert (replica.batches, replica.inferences) == (3, 20)
    assert replica.compute_s == pytest.approx(8 * 0.028 * 2 + 4 * 0.024)


def test_a_lone_request_waits_the_queue_delay_and_late_ones_miss_the_batch() -> None:
    batches = run_replica([0.1, 0.1015, 0.1025], 1.0)
    # Batch formed at 0.102: the request at 0.1025 arrives after it and waits its turn.
    assert batches[0][0] == pytest.approx(0.102 + 0.022)
    assert batches[0][1] == 2
    assert batches[1][1] == 1


def test_stepping_does_not_change_the_schedule() -> None:
    rng = np.random.default_rng(3)
    arrivals = np.sort(rng.uniform(0, 1.5, 400)).tolist()
    coarse = run_replica(arrivals, 1.0)
    fine = run_replica(arrivals, 0.05)
    assert len(coarse) == len(fine)
    for (e1, s1), (e2, s2) in zip(coarse, fine, strict=True):
        assert s1 == s2
        assert e1 == pytest.approx(e2)


# Knative KPA.


def test_kpa_panics_on_a_burst_and_does_not_scale_down_while_panicking() -> None:
    decider = KpaDecider(KpaConfig(container_concurrency_target=10), ready_pods=1, now=0.0)
    for _ in range(60):
        decider.record(70.0)  # 10 pods' worth at 7 per pod
    assert decider.scale(60.0, 10) == 10
    assert decider.panic_since is None
    for _ in range(6):
        decider.record(150.0)  # a 2x+ burst fills the 6 s panic window
    assert decider.scale(66.0, 10) == 22
    assert decider.panic_since == 66.0
    for _ in range(20):
        decider.record(10.0)
    assert decider.scale(86.0, 22) == 22  # calm again, but still panicking: no scale-down


def test_kpa_does_not_panic_below_twice_the_ready_pods() -> None:
    decider = KpaDecider(KpaConfig(container_concurrency_target=10), ready_pods=1, now=0.0)
    for _ in range(60):
        decider.record(70.0)
    decider.scale(60.0, 10)
    for _ in range(6):
        decider.record(130.0)  # asks for 19 of 10 ready pods: below 200%
    decider.scale(66.0, 10)
    assert decider.panic_since is None


# Cluster, oracle, search, trace.


def test_scale_down_deletes_starting_pods_before_ready_ones() -> None:
    cluster = Cluster(BATCHER, PodTiming(60.0, 30.0), initial=2)
    cluster.scale_to(4, 10.0)
    cluster.scale_to(3, 20.0)
    live = cluster.live()
    assert len(live) == 3
    assert sum(1 for p in live if p.ready(20.0)) == 2  # both warm pods kept


def poisson(rate: float, seconds: float, seed: int) -> Arrivals:
    rng = np.random.default_rng(seed)
    return np.sort(rng.uniform(0.0, seconds, rng.poisson(rate * seconds)))


def test_oracle_never_needs_more_than_a_fixed_count_that_meets_the_slo() -> None:
    workload = Workload("test", poisson(900.0, 180.0, 1), 180.0, {})
    fixed = 4
    config = SimConfig(BATCHER, PodTiming(), initial_replicas=fixed, slo_target_s=0.1)
    steady = simulate(workload, ScheduleScaler("fixed", [fixed] * 180), config)
    assert steady.attainment == 1.0
    needs = oracle_windows(workload, BATCHER, 0.1)
    assert max(needs) <= fixed
    assert max(provision_plan(needs, 60.0, 180.0)) <= fixed


def test_a_replay_scores_every_request_and_counts_pod_seconds() -> None:
    workload = Workload("test", poisson(300.0, 120.0, 2), 120.0, {})
    config = SimConfig(BATCHER, PodTiming(), initial_replicas=2, slo_target_s=0.25)
    result = simulate(workload, ScheduleScaler("fixed", [2] * 120), config)
    assert sum(result.score.requests) == workload.arrivals.size
    assert result.replica_seconds == pytest.approx(2 * 120)
    assert result.reversals == 0


def test_reversals_count_direction_changes() -> None:
    assert reversals([(0, 2), (1, 4), (2, 6), (3, 3), (4, 3), (5, 5)]) == 2


def test_search_returns_the_cheapest_setting_meeting_the_goal() -> None:
    def fake(value: float) -> Any:
        fields = {"attainment": 1.0 if value <= 6 else 0.9, "replica_seconds": 100 / value}
        return type("Run", (), fields)()

    knob = Knob("k", tuple(float(v) for v in range(1, 17)), 12.0)
    result = cheapest_passing(knob, 0.99, fake)
    assert result.chosen is not None
    assert result.chosen.replica_seconds == pytest.approx(100 / 6)
    assert 1.0 not in result.evaluated  # the most aggressive setting was never needed


def test_trace_loader_counts_every_arrival() -> None:
    arrivals = load_trace()
    assert arrivals.size == 19_366
    assert arrivals[0] == 0.0
    assert np.all(np.diff(arrivals) >= 0)


def test_amplification_makes_k_copies_within_the_jitter() -> None:
    base = np.array([0.0, 10.0, 20.0])
    out = amplify(base, 5, 2.0, seed=1)
    assert out.size == 15
    assert np.all(np.diff(out) >= 0)
    offsets = out - np.repeat(base, 5)
    assert np.all((offsets >= 0) & (offsets < 2.0))


def test_bursts_are_seeded_and_five_times_the_baseline() -> None:
    one, two = burst_workload(100.0, 10, seed=7), burst_workload(100.0, 10, seed=7)
    assert np.array_equal(one.arrivals, two.arrivals)
    spike = np.count_nonzero((one.arrivals >= 360) & (one.arrivals < 480)) / 120
    calm = np.count_nonzero(one.arrivals < 360) / 360
    assert 4.5 < spike / calm < 5.5
    assert rate_multiplier(np.array([0.0, 400.0]), ()).tolist() == [1.0, 1.0]


def test_missing_calibration_says_to_run_the_batching_benchmark(tmp_path: Path) -> None:
    results = tmp_path / "batching.json"
    results.write_text(json.dumps({"results": []}))
    with pytest.raises(CalibrationError, match=r"python -m benchmarks\.batching"):
        load_calibration(results)
    curve = {"points": [], "fit": {"base_ms": 21, "per_item_ms": 1.05}}
    results.write_text(json.dumps({"latency_curve": curve}))
    assert load_calibration(results).batch_seconds(8) == pytest.approx(0.0294)
