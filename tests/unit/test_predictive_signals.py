"""What the predictive loop feeds the predictor, from Prometheus' and the API server's
answers; and what it publishes for the HPA."""

from __future__ import annotations

from typing import Any

import pytest
from e2e.linear_model import linear_model

from shoal.api.batchpolicy import BatchPolicySpec
from shoal.api.inferencemodel import InferenceModel
from shoal.api.tenantpool import TenantPool
from shoal.autoscale.predict import CapacityEstimate
from shoal.autoscale.predictions import Prediction
from shoal.autoscale.signals import (
    NO_LATENCY_TARGET_S,
    batch_observations,
    batch_settings,
    cold_start_seconds,
    rate_histories,
)
from shoal.render.autoscaler import REQUIRED_REPLICAS_METRIC, horizontal_autoscaler
from shoal.render.batching import effective_batching
from shoal.render.schedule import Floor, raised

RANKER = {"namespace": "team", "inferencemodel": "ranker"}


def series(labels: dict[str, str], points: list[tuple[float, str]]) -> dict[str, Any]:
    return {"metric": labels, "values": [[t, v] for t, v in points]}


def test_a_missing_step_is_idle_and_the_grid_is_whole() -> None:
    # A model that appeared at 1030 s and had an idle step at 1045 s (no sample).
    matrix = [series(RANKER, [(1030, "4"), (1060, "6"), (1075, "NaN")])]
    histories = rate_histories(matrix, 1000, 1075, 15)
    assert histories[("team", "ranker")].rates == (0.0, 0.0, 4.0, 0.0, 6.0, 0.0)
    assert histories[("team", "ranker")].step_s == 15


def test_series_without_a_model_are_ignored() -> None:
    assert rate_histories([series({"namespace": "team"}, [(0, "1")])], 0, 15, 15) == {}


def test_batch_counters_are_per_pod_increments_where_all_three_agree() -> None:
    pod_a = {**RANKER, "pod": "ranker-a"}
    pod_b = {**RANKER, "pod": "ranker-b"}
    executions = [series(pod_a, [(0, "2"), (15, "1")]), series(pod_b, [(0, "1")])]
    inferences = [series(pod_a, [(0, "16"), (15, "4")]), series(pod_b, [(0, "8")])]
    compute = [series(pod_a, [(0, "0.1"), (15, "0.03")])]  # ranker-b's is missing
    observed = batch_observations(executions, inferences, compute, 15)
    counters = sorted(observed[("team", "ranker")], key=lambda c: c.executions)
    assert [(c.executions, c.inferences) for c in counters] == [(15, 60), (30, 240)]
    assert counters[0].compute_s == pytest.approx(0.45)


def _pod(created: str, ready: str | None) -> dict[str, Any]:
    conditions = [{"type": "Ready", "status": "True", "lastTransitionTime": ready}] if ready else []
    return {"metadata": {"creationTimestamp": created}, "status": {"conditions": conditions}}


def test_cold_start_is_the_median_of_the_pods_seen_ready() -> None:
    pods = [
        _pod("2026-01-01T00:00:00Z", "2026-01-01T00:00:40Z"),
        _pod("2026-01-01T00:01:00Z", "2026-01-01T00:01:50Z"),
        _pod("2026-01-01T00:02:00Z", "2026-01-01T00:03:00Z"),
        _pod("2026-01-01T00:02:00Z", None),  # still starting: no figure yet
    ]
    assert cold_start_seconds(pods) == 50
    assert cold_start_seconds([_pod("2026-01-01T00:02:00Z", None)]) is None


def _model(**scaling: Any) -> InferenceModel:
    return InferenceModel.model_validate(linear_model(20, 2, scaling=scaling or None))


def test_batch_settings_follow_the_batching_and_the_latency_target() -> None:
    policy = BatchPolicySpec(max_batch_size=16, max_queue_delay="5ms")
    settings = batch_settings(_model(targetP95Latency="80ms"), policy)
    assert (settings.max_batch_size, settings.max_queue_delay_s) == (16, 0.005)
    assert settings.target_p95_s == pytest.approx(0.08)
    # Without a latency target, any batch the batcher forms is acceptable.
    plain = batch_settings(_model(), None)
    assert plain.max_batch_size == effective_batching(_model(), None).max_batch_size
    assert plain.target_p95_s == NO_LATENCY_TARGET_S


def test_status_says_what_the_round_found() -> None:
    capacity = CapacityEstimate(41.234, 8, 0.02, 0.002, "fit")
    assert Prediction(12.345, capacity, 1, 42.0).status() == {
        "forecastRate": 12.35,
        "capacityPerReplica": 41.23,
        "requiredReplicas": 1,
        "coldStart": "42.00s",
    }
    assert Prediction(0.0, None, 0, None).status()["capacityPerReplica"] is None


def _metric_names(hpa: dict[str, Any]) -> list[str]:
    return [m["object"]["metric"]["name"] for m in hpa["spec"]["metrics"] if m["type"] == "Object"]


def test_predictive_models_scale_on_the_required_replicas_too() -> None:
    pool = TenantPool.model_validate(
        {
            "metadata": {"name": "p"},
            "spec": {
                "isolation": "Shared",
                "tenants": {"namespaces": ["ns"]},
                "quota": {"gpus": 8},
            },
        }
    ).spec
    batching = effective_batching(_model(), None)
    plain = horizontal_autoscaler(_model(), batching, pool)
    assert REQUIRED_REPLICAS_METRIC not in _metric_names(plain)
    disabled = horizontal_autoscaler(_model(predictive={"enabled": False}), batching, pool)
    assert disabled == plain
    predictive = horizontal_autoscaler(_model(predictive={"enabled": True}), batching, pool)
    metric = predictive["spec"]["metrics"][-1]["object"]
    assert metric["metric"]["name"] == REQUIRED_REPLICAS_METRIC
    # AverageValue 1: the HPA's desired count is the published number itself.
    assert metric["target"] == {"type": "AverageValue", "averageValue": "1"}
    # The reactive metrics stay beside it, as a safety net.
    assert (
        predictive["spec"]["metrics"][: len(plain["spec"]["metrics"])] == plain["spec"]["metrics"]
    )


def test_a_measured_warm_pool_only_raises_the_floor() -> None:
    floor = Floor(2, ("business-hours",))
    assert raised(floor, None) == floor
    assert raised(floor, 1) == floor
    assert raised(floor, 5) == Floor(5, ("business-hours",))
