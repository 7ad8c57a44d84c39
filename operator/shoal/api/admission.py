"""What a TenantPool admits (pure): which namespaces, and which models by its quota;
shared by the operator and the ValidatingAdmissionPolicy that enforces the same rules in
the API server."""

from __future__ import annotations

from collections.abc import Mapping

from shoal.api.common import LabelSelector
from shoal.api.inferencemodel import InferenceModel
from shoal.api.tenantpool import TenantPool


def selector_matches(selector: LabelSelector, labels: Mapping[str, str]) -> bool:
    if any(labels.get(k) != v for k, v in selector.match_labels.items()):
        return False
    for req in selector.match_expressions:
        present = req.key in labels
        if req.operator == "In" and not (present and labels[req.key] in req.values):
            return False
        if req.operator == "NotIn" and present and labels[req.key] in req.values:
            return False
        if req.operator == "Exists" and not present:
            return False
        if req.operator == "DoesNotExist" and present:
            return False
    return True


def admits(pool: TenantPool, namespace: str, labels: Mapping[str, str]) -> bool:
    """Whether ``pool`` admits the namespace named ``namespace`` with ``labels``."""
    tenants = pool.spec.tenants
    if namespace in tenants.namespaces:
        return True
    return tenants.selector is not None and selector_matches(tenants.selector, labels)


def refusals(pool: TenantPool, model: InferenceModel, labels: Mapping[str, str]) -> list[str]:
    """Why ``pool`` refuses ``model`` (in its namespace, which has ``labels``), in the words
    of the admission policy (admission_policy.py), in its order; empty if it admits it.

    A pure mirror of the policy for the operator, which must judge models the API server
    admitted before their pool changed."""
    namespace = model.metadata.namespace or ""
    name = pool.metadata.name
    quota = pool.spec.quota
    scaling = model.spec.scaling
    gpus = model.spec.runtime.gpus
    out = []
    if not admits(pool, namespace, labels):
        out.append(f"spec.pool: TenantPool {name} does not admit namespace {namespace}")

    def floor(index: int, needs: int, allowed: int, unit: str) -> str:
        return (
            f"spec.scaling.schedules[{index}].minReplicas: the scheduled floor "
            f"{scaling.schedules[index].name} needs {needs} {unit}; TenantPool {name} "
            f"allows {allowed} per namespace"
        )

    if scaling.min_replicas * gpus > quota.gpus:
        out.append(
            f"spec.scaling.minReplicas: the warm pool needs {scaling.min_replicas * gpus} GPUs; "
            f"TenantPool {name} allows {quota.gpus} per namespace"
        )
    over = [i for i, w in enumerate(scaling.schedules) if w.min_replicas * gpus > quota.gpus]
    if over:
        out.append(
            floor(over[0], scaling.schedules[over[0]].min_replicas * gpus, quota.gpus, "GPUs")
        )
    if quota.replicas is not None:
        if scaling.min_replicas > quota.replicas:
            out.append(
                f"spec.scaling.minReplicas: the warm pool needs {scaling.min_replicas} replicas; "
                f"TenantPool {name} allows {quota.replicas} per namespace"
            )
        over = [i for i, w in enumerate(scaling.schedules) if w.min_replicas > quota.replicas]
        if over:
            out.append(
                floor(over[0], scaling.schedules[over[0]].min_replicas, quota.replicas, "replicas")
            )
    return out
