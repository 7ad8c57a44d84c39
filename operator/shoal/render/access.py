"""Whether a pool's access lists can be trusted, as a TenantPool condition (pure).

A gateway or monitoring namespace reaches the pool's models by its name alone (the
immutable ``kubernetes.io/metadata.name`` label). So a listed name that no namespace
holds yet is a standing invitation: whoever may create namespaces can create it and
call, or scrape, every model of the pool. And a listed namespace that is itself a
tenant's lets that tenant's own pods do the same. The API server already refuses a
pool whose tenant *list* overlaps its access lists; tenants admitted by a selector,
and other pools' tenants, can only be seen against the live namespaces, here.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from shoal.api.admission import admits
from shoal.api.tenantpool import TenantPool
from shoal.render.tenancy import NAME_LABEL

#: The condition type the pool's status carries the verdict in.
ACCESS_CONDITION = "AccessNamespacesVerified"
MISSING = "AccessNamespaceMissing"
IS_TENANT = "AccessNamespaceIsTenant"


@dataclass(frozen=True)
class AccessProblem:
    """One listed access namespace that should not be trusted as it stands."""

    field: str  # "gatewayNamespaces" or "monitoringNamespaces"
    namespace: str
    reason: str  # MISSING or IS_TENANT
    message: str


def _live(namespaces: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, str]]:
    """Name -> labels of the namespaces that exist and are not being deleted."""
    out = {}
    for ns in namespaces:
        meta = ns.get("metadata") or {}
        if meta.get("name") and not meta.get("deletionTimestamp"):
            out[meta["name"]] = {NAME_LABEL: meta["name"], **(meta.get("labels") or {})}
    return out


def access_problems(
    pool: TenantPool,
    namespaces: Iterable[Mapping[str, Any]],
    pools: Iterable[TenantPool],
) -> list[AccessProblem]:
    """The problems with ``pool``'s gateway and monitoring namespaces, given the
    cluster's namespaces (as listed, terminating ones included) and every TenantPool
    (``pool`` among them or not): a listed namespace that does not exist or is being
    deleted, and one that is a tenant namespace of any pool, by name or by selector."""
    live = _live(namespaces)
    everyone = {p.metadata.name: p for p in pools}
    everyone[pool.metadata.name] = pool
    out = []
    access = pool.spec.access
    for field, listed in (
        ("gatewayNamespaces", access.gateway_namespaces),
        ("monitoringNamespaces", access.monitoring_namespaces),
    ):
        for name in sorted(listed):
            labels = live.get(name)
            tenant_of = sorted(
                p.metadata.name
                for p in everyone.values()
                if name in p.spec.tenants.namespaces
                or (labels is not None and admits(p, name, labels))
            )
            if tenant_of:
                out.append(
                    AccessProblem(
                        field,
                        name,
                        IS_TENANT,
                        f"{field} lists {name!r}, a tenant namespace of TenantPool(s) "
                        f"{', '.join(tenant_of)}: its tenant's own pods reach this pool's "
                        "models. Use a namespace only the gateway or monitoring stack runs in.",
                    )
                )
            elif labels is None:
                out.append(
                    AccessProblem(
                        field,
                        name,
                        MISSING,
                        f"{field} lists {name!r}, which does not exist (or is being "
                        "deleted): anyone allowed to create namespaces could create it and "
                        "reach this pool's models. Create it, or remove it from the list.",
                    )
                )
    return out


def access_condition(problems: list[AccessProblem]) -> dict[str, str]:
    """The pool's AccessNamespacesVerified condition: type, status, reason, message."""
    if not problems:
        return {
            "type": ACCESS_CONDITION,
            "status": "True",
            "reason": "Verified",
            "message": "Every gateway and monitoring namespace exists and is no tenant's.",
        }
    return {
        "type": ACCESS_CONDITION,
        "status": "False",
        "reason": problems[0].reason,
        "message": " ".join(p.message for p in problems),
    }
