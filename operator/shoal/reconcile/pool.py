"""Reconciling a TenantPool: its PriorityClass, a quota and network policies in every
tenant namespace it admits (removed from namespaces it no longer admits), and a
summary of its models in status."""

from __future__ import annotations

from typing import Any

from shoal.api.admission import admits
from shoal.api.common import parse_object
from shoal.api.tenantpool import TenantPool
from shoal.kube.client import ApiError, Kube
from shoal.reconcile.conditions import Cond, observed_status, status_differs
from shoal.render.desired import pool_objects
from shoal.render.names import POOL_LABEL
from shoal.render.tenancy import tenant_objects

TENANT_KINDS = (("v1", "ResourceQuota"), ("networking.k8s.io/v1", "NetworkPolicy"))


def pool_usage(models: list[dict[str, Any]]) -> dict[str, int]:
    """GPUs, models and replicas of the pool's InferenceModels, from their status (pure)."""
    gpus = replicas = 0
    for model in models:
        count = int((model.get("status") or {}).get("replicas") or 0)
        per_replica = int(((model.get("spec") or {}).get("runtime") or {}).get("gpus", 1))
        replicas += count
        gpus += count * per_replica
    return {"gpusUsed": gpus, "models": len(models), "replicas": replicas}


def admitted_namespaces(pool: TenantPool, namespaces: list[dict[str, Any]]) -> list[str]:
    """Names of the live (not terminating) namespaces the pool admits (pure)."""
    out = []
    for ns in namespaces:
        meta = ns.get("metadata") or {}
        if meta.get("deletionTimestamp"):
            continue
        if admits(pool, meta["name"], meta.get("labels") or {}):
            out.append(meta["name"])
    return sorted(out)


def _key(obj: dict[str, Any]) -> tuple[str, str, str]:
    meta = obj["metadata"]
    return (obj["kind"], meta.get("namespace") or "", meta["name"])


def reconcile_pool(
    kube: Kube,
    body: dict[str, Any],
    models: list[dict[str, Any]],
    namespaces: list[dict[str, Any]],
) -> None:
    pool = parse_object(TenantPool, body)
    admitted = admitted_namespaces(pool, namespaces)
    desired = pool_objects(pool) + [o for ns in admitted for o in tenant_objects(pool, ns)]
    try:
        for obj in desired:
            kube.apply(obj)
        wanted = {_key(o) for o in desired}
        for api_version, kind in TENANT_KINDS:
            for live in kube.list(api_version, kind, labels=f"{POOL_LABEL}={pool.metadata.name}"):
                live = {**live, "apiVersion": api_version, "kind": kind}
                if _key(live) not in wanted:
                    kube.delete(live)
        ready = Cond(
            "Ready",
            "True",
            "Accepted",
            f"Admits {len(admitted)} namespace(s); quotas and network policies are applied.",
        )
    except ApiError as exc:
        ready = Cond("Ready", "False", "ApplyFailed", f"{exc.status} {exc.reason}: {exc.body}")
    status = observed_status(body, [ready], admittedNamespaces=admitted, **pool_usage(models))
    if status_differs(body.get("status"), status):
        kube.patch_status(body, status)


def models_of_pool(kube: Kube, pool_name: str) -> list[dict[str, Any]]:
    """The pool's InferenceModels, in every namespace (``spec.pool`` is a selectable
    field of the CRD, so the API server sends only those)."""
    return kube.list("shoal.dev/v1alpha1", "InferenceModel", fields=f"spec.pool={pool_name}")
