"""The alerts Shoal ships, as data (pure): a Prometheus rule group, each alert with a
runbook section in docs/operations.md.

They read three sources: the operator's own metrics (``shoal_*``; every replica serves
them, ``shoal_leader`` says which one leads), the recording rules of
``shoal.metrics.pipeline``, and kube-state-metrics (``kube_*``, part of every
kube-prometheus-stack install) for the HPAs and quotas Shoal renders. Shoal's HPAs are
told apart from others by joining on ``shoal_model_condition``: an HPA is named after
its model.
"""

from __future__ import annotations

from typing import Any

RUNBOOK = "https://github.com/shoal-dev/shoal/blob/main/docs/operations.md"
# An HPA carries its model's name: the join that keeps Shoal's HPAs only.
SHOAL_HPA = (
    'label_replace(max by (namespace, inferencemodel) (shoal_model_condition{type="Ready"}), '
    '"horizontalpodautoscaler", "$1", "inferencemodel", "(.+)")'
)
GPU_QUOTA = 'kube_resourcequota{resourcequota=~"shoal-pool-.+",resource="requests.nvidia.com/gpu"'


def _alert(
    name: str, expr: str, for_: str, severity: str, summary: str, description: str
) -> dict[str, Any]:
    return {
        "alert": name,
        "expr": " ".join(expr.split()),
        "for": for_,
        "labels": {"severity": severity},
        "annotations": {
            "summary": summary,
            "description": description,
            "runbook_url": f"{RUNBOOK}#{name.lower()}",
        },
    }


def alerting_rules() -> dict[str, Any]:
    """A Prometheus rule file (the ``groups:`` document) of Shoal's alerts."""
    rules = [
        _alert(
            "ShoalOperatorDown",
            "absent(shoal_leader == 1)",
            "5m",
            "critical",
            "No Shoal operator is leading",
            "No operator replica has led for 5 minutes (none reports shoal_leader 1, or "
            "none is scraped): nothing reconciles, so changes to models and pools are not "
            "applied.",
        ),
        _alert(
            "ShoalReconcileErrors",
            'sum by (kind) (rate(shoal_reconciles_total{result="error"}[5m])) '
            "/ sum by (kind) (rate(shoal_reconciles_total[5m])) > 0.1",
            "15m",
            "warning",
            "Shoal's {{ $labels.kind }} passes keep failing",
            "{{ $value | humanizePercentage }} of {{ $labels.kind }} passes failed over "
            "the last 5 minutes, for 15 minutes; they are retried with backoff.",
        ),
        _alert(
            "ShoalWorkQueueGrowing",
            "min_over_time(shoal_workqueue_depth[15m]) > 50",
            "5m",
            "warning",
            "Shoal's work queue does not drain",
            "At least {{ $value }} objects have waited for a pass at every moment of the "
            "last 15 minutes: the operator falls behind its events.",
        ),
        _alert(
            "ShoalWatchStale",
            "shoal_watch_stale_objects > 0",
            "5m",
            "warning",
            "Shoal's watch misses updates",
            "{{ $value }} models are listed at a version the watch never delivered; the "
            "liveness probe restarts the operator when this lasts.",
        ),
        _alert(
            "ShoalModelNotReady",
            'shoal_model_condition{type="Ready",status="False"} == 1',
            "15m",
            "warning",
            "InferenceModel {{ $labels.namespace }}/{{ $labels.inferencemodel }} is not Ready",
            "The model has not been Ready for 15 minutes; its status conditions and "
            "Events say why.",
        ),
        _alert(
            "ShoalModelP95OverTarget",
            "max by (namespace, inferencemodel) (shoal:request_p95_seconds:model) "
            "> on (namespace, inferencemodel) shoal_model_target_p95_seconds",
            "10m",
            "warning",
            "{{ $labels.namespace }}/{{ $labels.inferencemodel }} is slower than its target",
            "The slowest replica's P95 has been {{ $value | humanizeDuration }}, over the "
            "model's targetP95Latency, for 10 minutes.",
        ),
        _alert(
            "ShoalModelAtMaxReplicas",
            "(kube_horizontalpodautoscaler_status_current_replicas "
            ">= on (namespace, horizontalpodautoscaler) "
            "kube_horizontalpodautoscaler_spec_max_replicas) "
            f"and on (namespace, horizontalpodautoscaler) {SHOAL_HPA}",
            "15m",
            "warning",
            "{{ $labels.namespace }}/{{ $labels.horizontalpodautoscaler }} is at maxReplicas",
            "The model's autoscaler has held its maximum for 15 minutes: demand may "
            "exceed what the model is allowed.",
        ),
        _alert(
            "ShoalAutoscalerMetricsMissing",
            'kube_horizontalpodautoscaler_status_condition{condition="ScalingActive",'
            'status="false"} == 1 '
            f"and on (namespace, horizontalpodautoscaler) {SHOAL_HPA}",
            "10m",
            "warning",
            "{{ $labels.namespace }}/{{ $labels.horizontalpodautoscaler }} cannot autoscale",
            "The HPA reports ScalingActive=False: it cannot read its metrics (recording "
            "rules or the metrics adapter missing), so the model stays at its replicas.",
        ),
        _alert(
            "ShoalPoolQuotaNearlyFull",
            f'{GPU_QUOTA},type="used"}} / ignoring (type) {GPU_QUOTA},type="hard"}} > 0.9',
            "15m",
            "warning",
            "Pool quota {{ $labels.resourcequota }} in {{ $labels.namespace }} is nearly full",
            "{{ $value | humanizePercentage }} of the pool's GPUs in this namespace are in "
            "use: the next scale-up may be refused by the quota.",
        ),
        _alert(
            "ShoalGatewayRejectingTenant",
            'sum by (pool, namespace) ({__name__=~"shoal:gateway_(rate|concurrency)_limited_'
            'rate:tenant"}) / sum by (pool, namespace) (shoal:gateway_request_rate:tenant) '
            "> 0.05",
            "10m",
            "warning",
            "Pool {{ $labels.pool }}'s gateway refuses tenant {{ $labels.namespace }}",
            "{{ $value | humanizePercentage }} of the tenant's requests are refused at its "
            "rate or concurrency limit, for 10 minutes.",
        ),
        _alert(
            "ShoalDedicatedPoolWaitsForReclaim",
            'shoal_pool_waiting_replicas{isolation="Dedicated"} > 0 '
            'and on (tenantpool) shoal_pool_gpus{kind="lent"} > 0',
            "2m",
            "warning",
            "Dedicated pool {{ $labels.tenantpool }} waits for GPUs it lent",
            "{{ $value }} of the pool's replicas have waited for quota for 2 minutes while "
            "other pools still use GPUs it lent: reclaiming them takes longer than the "
            "60 s Shoal targets.",
        ),
    ]
    return {"groups": [{"name": "shoal.alerts", "rules": rules}]}
