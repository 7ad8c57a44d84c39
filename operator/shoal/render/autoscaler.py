"""The HorizontalPodAutoscaler of one InferenceModel: queue depth and P95 latency.

Targets are quantities, written in the canonical form the API server stores ("1000m" is
stored as "1", 1000 as "1k"), so that the live object reads back as it was applied.

The metric names are the ones the shipped prometheus-adapter rules expose (see
docs/autoscaling.md): queue depth per pod, the model's P95 latency as an object metric
on its Service, and, when its pool has a gateway, the requests waiting there for one of
the model's replicas (also on its Service).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from shoal.api.batchpolicy import BatchPolicySpec
from shoal.api.common import parse_duration
from shoal.api.inferencemodel import InferenceModel, ScalingPolicy
from shoal.api.quantity import canonical_quantity
from shoal.api.tenantpool import TenantPoolSpec
from shoal.render.names import model_metadata

QUEUE_METRIC = "shoal_queue_depth"
P95_METRIC = "shoal_request_p95_seconds"
GATEWAY_QUEUE_METRIC = "shoal_gateway_queue_depth"
REQUIRED_REPLICAS_METRIC = "shoal_required_replicas"
PERIOD_SECONDS = 15
# The cool-down a predictive model wants (docs/autoscaling.md): its learned error keeps
# standing what its bursts needed, and a 5-minute window holds the top of the forecast's
# noise on top, which the replay measures as the dearer setting. Advice, not a default:
# v1alpha1 stores 5m for every model (docs/api-versioning.md).
PREDICTIVE_COOL_DOWN = "1m"
# The HPA's condition that says whether it can read its metrics (AutoscalerReady).
SCALING_ACTIVE = "ScalingActive"


def target_queue_depth(model: InferenceModel, batching: BatchPolicySpec) -> int:
    """Waiting requests per replica to aim for: the spec's, or a quarter of a batch.

    Triton's pending count leaves out the batch being executed, so a replica that keeps
    up shows few waiting requests: in the autoscaling benchmark (calibrated on the
    measured batch curve) a replica at 80% of its capacity averages about a third of a
    batch waiting, and two batches' worth (the former default) appears only past
    saturation, so the HPA let replicas saturate before adding any. A quarter of a
    batch aims at roughly 75% of a replica's capacity, like Knative's default 70%
    target utilisation.
    """
    return model.spec.scaling.target_queue_depth or max(1, batching.max_batch_size // 4)


def max_replicas(model: InferenceModel, pool: TenantPoolSpec) -> int:
    """The spec's maximum, capped by what the pool's per-tenant GPU quota can hold."""
    wanted = model.spec.scaling.max_replicas
    gpus = model.spec.runtime.gpus
    if gpus:
        wanted = min(wanted, max(pool.quota.gpus // gpus, 1))
    return max(wanted, model.spec.scaling.min_replicas)


def _rules(policy: ScalingPolicy, *, up: bool) -> dict[str, Any]:
    if policy.max_replicas_per_step:
        policies = [
            {"type": "Pods", "value": policy.max_replicas_per_step, "periodSeconds": PERIOD_SECONDS}
        ]
    elif up:
        # Double, or add four, every period: whichever is more (upstream's defaults).
        policies = [
            {"type": "Percent", "value": 100, "periodSeconds": PERIOD_SECONDS},
            {"type": "Pods", "value": 4, "periodSeconds": PERIOD_SECONDS},
        ]
    else:
        policies = [{"type": "Percent", "value": 100, "periodSeconds": PERIOD_SECONDS}]
    return {
        "stabilizationWindowSeconds": round(parse_duration(policy.stabilization_window)),
        "selectPolicy": "Max",
        "policies": policies,
    }


def _milli(seconds: float) -> str:
    """A latency target as the HPA reads it, in whole milliseconds: a sub-millisecond
    part is dropped, so the target is never looser than asked (2500us is 2m, 3500us 3m,
    where rounding to the nearest sent ties to the even one), and never below 1ms."""
    return canonical_quantity(f"{max(1, math.floor(round(seconds * 1_000_000) / 1000))}m")


@dataclass(frozen=True)
class ReplicaBounds:
    """The replicas a model may run between: its HPA's minReplicas and maxReplicas, the
    bounds its forecast is clamped to, and what its status reports."""

    floor: int
    ceiling: int


def replica_bounds(
    model: InferenceModel,
    pool: TenantPoolSpec,
    min_replicas: int | None = None,
    gpu_ceiling: int | None = None,
) -> ReplicaBounds:
    """``min_replicas`` overrides the warm pool (a scheduled window, the forecast's warm
    pool); ``gpu_ceiling`` bounds both ends by the GPUs the pool can admit the model to
    now. The pool's per-tenant GPU quota caps the spec's maximum."""
    floor = min_replicas or model.spec.scaling.min_replicas
    ceiling = max_replicas(model, pool)
    gpus = model.spec.runtime.gpus
    if gpu_ceiling is not None and gpus:
        # An HPA keeps at least one replica: at 0 GPUs it waits for quota.
        ceiling = min(ceiling, max(gpu_ceiling // gpus, 1))
    return ReplicaBounds(min(floor, ceiling), ceiling)


def horizontal_autoscaler(
    model: InferenceModel,
    batching: BatchPolicySpec,
    pool: TenantPoolSpec,
    min_replicas: int | None = None,
    gpu_ceiling: int | None = None,
) -> dict[str, Any]:
    """``min_replicas`` overrides the warm pool, e.g. inside a scheduled window;
    ``gpu_ceiling`` bounds both ends by the GPUs the pool can admit the model to now
    (an elastic pool's nominal GPUs, which a capacity window may lower): the HPA then
    scales the replicas above it down, gracefully, rather than Kueue holding them."""
    scaling = model.spec.scaling
    name = model.metadata.name
    metrics: list[dict[str, Any]] = [
        {
            "type": "Pods",
            "pods": {
                "metric": {"name": QUEUE_METRIC},
                "target": {
                    "type": "AverageValue",
                    "averageValue": canonical_quantity(str(target_queue_depth(model, batching))),
                },
            },
        }
    ]
    if scaling.target_p95_latency:
        metrics.append(
            {
                "type": "Object",
                "object": {
                    "describedObject": {"apiVersion": "v1", "kind": "Service", "name": name},
                    "metric": {"name": P95_METRIC},
                    "target": {
                        "type": "Value",
                        "value": _milli(parse_duration(scaling.target_p95_latency)),
                    },
                },
            }
        )
    if pool.gateway.enabled:
        # Requests the gateway holds back because every replica's slots are taken: the
        # demand Triton's queue cannot show. Per replica, the same target as Triton's
        # queue, so the HPA asks for enough replicas to bring both under it.
        metrics.append(
            {
                "type": "Object",
                "object": {
                    "describedObject": {"apiVersion": "v1", "kind": "Service", "name": name},
                    "metric": {"name": GATEWAY_QUEUE_METRIC},
                    "target": {
                        "type": "AverageValue",
                        "averageValue": canonical_quantity(
                            str(target_queue_depth(model, batching))
                        ),
                    },
                },
            }
        )
    if scaling.predictive is not None and scaling.predictive.enabled:
        # The replicas the operator's forecast needs (shoal.autoscale): AverageValue 1
        # makes the HPA's desired count that number. The reactive metrics above stay: the
        # HPA follows whichever asks for more, so a wrong forecast cannot starve a model.
        metrics.append(
            {
                "type": "Object",
                "object": {
                    "describedObject": {"apiVersion": "v1", "kind": "Service", "name": name},
                    "metric": {"name": REQUIRED_REPLICAS_METRIC},
                    "target": {"type": "AverageValue", "averageValue": "1"},
                },
            }
        )
    bounds = replica_bounds(model, pool, min_replicas, gpu_ceiling)
    return {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": model_metadata(model, name),
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": name},
            "minReplicas": bounds.floor,
            "maxReplicas": bounds.ceiling,
            "metrics": metrics,
            "behavior": {
                "scaleUp": _rules(scaling.scale_up, up=True),
                "scaleDown": _rules(scaling.scale_down, up=False),
            },
        },
    }


def scaling_active(hpa_status: dict[str, Any]) -> dict[str, Any] | None:
    """The part of an HPA's ScalingActive condition Shoal depends on, or None."""
    for cond in hpa_status.get("conditions") or []:
        if cond.get("type") == SCALING_ACTIVE:
            kept = {
                "type": SCALING_ACTIVE,
                "status": cond.get("status"),
                "reason": cond.get("reason"),
            }
            if cond.get("status") != "True":
                kept["message"] = cond.get("message") or ""
            return kept
    return None
