"""Reconciling a BatchPolicy: it has no objects of its own, only a status."""

from __future__ import annotations

from typing import Any

from shoal.api.batchpolicy import BatchPolicy
from shoal.api.common import parse_object
from shoal.kube.client import Kube
from shoal.reconcile.conditions import Cond, merge_conditions, now_rfc3339, status_differs


def reconcile_policy(kube: Kube, body: dict[str, Any], model_count: int) -> None:
    policy = parse_object(BatchPolicy, body)
    ready = Cond("Ready", "True", "Accepted", f"Used by {model_count} InferenceModel(s).")
    live = body.get("status") or {}
    status = {
        "observedGeneration": policy.metadata.generation,
        "conditions": merge_conditions(
            live.get("conditions", []), [ready], policy.metadata.generation, now_rfc3339()
        ),
        "models": model_count,
    }
    if status_differs(live, status):
        kube.patch_status(body, status)
