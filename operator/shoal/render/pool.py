"""Objects of a TenantPool that do not depend on its tenants: its PriorityClass."""

from __future__ import annotations

from typing import Any

from shoal.api.tenantpool import TenantPool, TenantPoolSpec
from shoal.render.names import MANAGED_BY, POOL_LABEL, owner_references, pool_priority_class

DEFAULT_PRIORITY = {"Dedicated": 100_000, "Shared": 1_000}


def priority_value(pool: TenantPoolSpec) -> int:
    value = pool.priority.value
    return DEFAULT_PRIORITY[pool.isolation] if value is None else value


def priority_class(pool: TenantPool) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {
            "name": pool_priority_class(pool.metadata.name),
            "labels": {"app.kubernetes.io/managed-by": MANAGED_BY, POOL_LABEL: pool.metadata.name},
            "ownerReferences": owner_references(
                "TenantPool", pool.metadata.name, pool.metadata.uid
            ),
        },
        "value": priority_value(pool.spec),
        "preemptionPolicy": pool.spec.priority.preemption_policy,
        # globalDefault stays unset (false): the API server omits a false one, and a
        # desired field the live object never shows would be re-applied on every pass.
        "description": f"Pods of the {pool.spec.isolation} TenantPool {pool.metadata.name}.",
    }
