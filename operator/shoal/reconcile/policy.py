"""Reconciling a BatchPolicy: it has no objects of its own, only a status."""

from __future__ import annotations

from typing import Any

from shoal.kube.client import Kube
from shoal.reconcile.conditions import Cond, observed_status, status_differs


def reconcile_policy(kube: Kube, body: dict[str, Any], model_count: int) -> None:
    ready = Cond("Ready", "True", "Accepted", f"Used by {model_count} InferenceModel(s).")
    status = observed_status(body, [ready], models=model_count)
    if status_differs(body.get("status"), status):
        kube.patch_status(body, status)
