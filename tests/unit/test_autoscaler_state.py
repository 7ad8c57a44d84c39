"""AutoscalerReady from an HPA's ScalingActive, as the HPA controller writes it, and
which HPA status changes call for a pass (pure)."""

from __future__ import annotations

from typing import Any

from shoal.cache import signature
from shoal.reconcile.autoscaler_state import autoscaler_condition

MISSING = {
    "type": "ScalingActive",
    "status": "False",
    "reason": "FailedGetPodsMetric",
    "message": "the HPA was unable to compute the replica count: unable to get metric "
    "shoal_queue_depth: unable to fetch metrics from custom metrics API: no custom "
    "metrics API (custom.metrics.k8s.io) registered",
}


def hpa(*conditions: dict[str, Any], **status: Any) -> dict[str, Any]:
    return {
        "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": "ranker", "namespace": "team", "generation": 1},
        "spec": {"maxReplicas": 4},
        "status": {"conditions": list(conditions), **status},
    }


def reading(metric: str) -> dict[str, Any]:
    return {
        "type": "ScalingActive",
        "status": "True",
        "reason": "ValidMetricFound",
        "message": f"the HPA was able to successfully calculate a replica count from {metric}",
    }


def test_the_hpas_scaling_active_becomes_the_models_autoscaler_ready() -> None:
    missing = autoscaler_condition(hpa({"type": "AbleToScale", "status": "True"}, MISSING))
    assert (missing.status, missing.reason) == ("False", "FailedGetPodsMetric")
    assert missing.message.startswith("The HPA cannot scale: the HPA was unable")
    ok = autoscaler_condition(hpa(reading("pods metric shoal_queue_depth")))
    assert (ok.status, ok.reason) == ("True", "MetricsRead")
    assert autoscaler_condition(hpa()).status == "Unknown"
    assert autoscaler_condition(None).reason == "NotEvaluated"


def test_only_a_change_that_matters_calls_for_a_pass() -> None:
    """Turning False (or back) does; the metric the HPA names while True, its current
    metrics and desired replicas do not (they change with the load)."""
    queue = signature("HorizontalPodAutoscaler", hpa(reading("pods metric shoal_queue_depth")))
    p95 = signature(
        "HorizontalPodAutoscaler",
        hpa(reading("object metric shoal_request_p95_seconds"), desiredReplicas=3),
    )
    assert queue == p95
    assert signature("HorizontalPodAutoscaler", hpa(MISSING)) != queue
    # The cache's projection keeps what the pass reads: the same condition results.
    from shoal.cache import projection

    projected = projection("HorizontalPodAutoscaler", hpa(MISSING))
    assert autoscaler_condition(projected) == autoscaler_condition(hpa(MISSING))


def test_an_hpa_idle_at_zero_replicas_is_not_a_metrics_fault() -> None:
    # What the HPA controller writes while its Deployment is at 0 replicas.
    disabled = {
        "type": "ScalingActive",
        "status": "False",
        "reason": "ScalingDisabled",
        "message": "scaling is disabled since the replica count of the target is zero",
    }
    cond = autoscaler_condition(hpa(disabled))
    assert (cond.status, cond.reason) == ("Unknown", "ScalingDisabled")
    # A real fault stays False, so it is still announced as a Warning.
    assert autoscaler_condition(hpa(MISSING)).status == "False"
