"""Whether a model's HorizontalPodAutoscaler can read its metrics, as a condition.

A model whose HPA cannot read its metrics (no metrics adapter, its rules not shipped,
Prometheus not scraping the pods) still serves and reports Ready, but never scales: the
HPA says so only in its own ``ScalingActive`` condition. ``AutoscalerReady`` carries
that onto the model, where `kubectl get im`, alerts and GitOps tools look.

What a pass depends on is ScalingActive's status and reason, and the message only when
it is False: while True, the HPA names in its message whichever metric gave the most
replicas last, which changes with the load and must not call for passes or writes.
Pure.
"""

from __future__ import annotations

from typing import Any

from shoal.api.conditions import Cond
from shoal.render.autoscaler import scaling_active

# The HPA's reason while its target has no replicas: it does not scale from zero, which
# says nothing about its metrics (a model its pool's capacity window parked, or an
# HPA that has not looked again since the model came back).
SCALING_DISABLED = "ScalingDisabled"
AUTOSCALER_READY = "AutoscalerReady"
NOT_EVALUATED = Cond(
    AUTOSCALER_READY, "Unknown", "NotEvaluated", "The HPA has not evaluated its metrics yet."
)


def autoscaler_condition(hpa: dict[str, Any] | None) -> Cond:
    """AutoscalerReady from the model's HPA (a full object, or the cache's projection,
    whose status holds only what ``scaling_active`` keeps)."""
    active = scaling_active((hpa or {}).get("status") or {})
    if active is None:
        return NOT_EVALUATED
    if active["status"] == "True":
        return Cond(AUTOSCALER_READY, "True", "MetricsRead", "The HPA reads its metrics.")
    if active["reason"] == SCALING_DISABLED:
        return Cond(
            AUTOSCALER_READY,
            "Unknown",
            SCALING_DISABLED,
            "The HPA is idle: the model's Deployment has no replicas.",
        )
    return Cond(
        AUTOSCALER_READY,
        str(active["status"] or "Unknown"),
        str(active["reason"] or "ScalingInactive"),
        f"The HPA cannot scale: {active['message']}".strip(),
    )
