"""Reconciling a TenantPool: its own objects, and a summary of its models in status."""

from __future__ import annotations

from typing import Any

from shoal.api.common import parse_object
from shoal.api.tenantpool import TenantPool
from shoal.kube.client import ApiError, Kube
from shoal.reconcile.conditions import Cond, merge_conditions, now_rfc3339, status_differs
from shoal.render.desired import pool_objects


def pool_usage(models: list[dict[str, Any]]) -> dict[str, int]:
    """GPUs, models and replicas of the pool's InferenceModels, from their status (pure)."""
    gpus = replicas = 0
    for model in models:
        count = int((model.get("status") or {}).get("replicas") or 0)
        per_replica = int(((model.get("spec") or {}).get("runtime") or {}).get("gpus", 1))
        replicas += count
        gpus += count * per_replica
    return {"gpusUsed": gpus, "models": len(models), "replicas": replicas}


def reconcile_pool(kube: Kube, body: dict[str, Any], models: list[dict[str, Any]]) -> None:
    pool = parse_object(TenantPool, body)
    try:
        for obj in pool_objects(pool):
            kube.apply(obj)
        ready = Cond("Ready", "True", "Accepted", "The pool's objects are applied.")
    except ApiError as exc:
        ready = Cond("Ready", "False", "ApplyFailed", f"{exc.status} {exc.reason}: {exc.body}")
    live = body.get("status") or {}
    status = {
        "observedGeneration": pool.metadata.generation,
        "conditions": merge_conditions(
            live.get("conditions", []), [ready], pool.metadata.generation, now_rfc3339()
        ),
        **pool_usage(models),
    }
    if status_differs(live, status):
        kube.patch_status(body, status)


def models_of_pool(kube: Kube, pool_name: str) -> list[dict[str, Any]]:
    """The pool's InferenceModels, in every namespace."""
    return [
        m
        for m in kube.list("shoal.dev/v1alpha1", "InferenceModel")
        if (m.get("spec") or {}).get("pool") == pool_name
    ]
