"""What a TenantPool puts into each tenant namespace it admits: a ResourceQuota and
NetworkPolicies. Pure functions.

The quota is scoped to the pool's PriorityClass, so it counts exactly the pool's pods
(a namespace may belong to several pools). Network policies select the pool's model
pods and name namespaces only by the immutable ``kubernetes.io/metadata.name`` label,
never by labels a tenant can set on its own namespace.
"""

from __future__ import annotations

from typing import Any

from shoal.api.tenantpool import TenantPool
from shoal.render.names import (
    GRPC_PORT,
    HTTP_PORT,
    MANAGED_BY,
    METRICS_PORT,
    POOL_LABEL,
    owner_references,
    pool_priority_class,
)

NAME_LABEL = "kubernetes.io/metadata.name"
DNS_NAMESPACE = "kube-system"
DNS_POD_LABELS = {"k8s-app": "kube-dns"}


def _meta(pool: TenantPool, name: str, namespace: str) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": name,
        "namespace": namespace,
        "labels": {"app.kubernetes.io/managed-by": MANAGED_BY, POOL_LABEL: pool.metadata.name},
    }
    owners = owner_references("TenantPool", pool.metadata.name, pool.metadata.uid)
    if owners:
        meta["ownerReferences"] = owners
    return meta


def _namespaces(names: list[str]) -> dict[str, Any]:
    return {
        "namespaceSelector": {
            "matchExpressions": [{"key": NAME_LABEL, "operator": "In", "values": sorted(names)}]
        }
    }


def resource_quota(pool: TenantPool, namespace: str) -> dict[str, Any]:
    hard: dict[str, str] = {"requests.nvidia.com/gpu": str(pool.spec.quota.gpus)}
    if pool.spec.quota.replicas is not None:
        hard["pods"] = str(pool.spec.quota.replicas)
    return {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": _meta(pool, pool_priority_class(pool.metadata.name), namespace),
        "spec": {
            "hard": hard,
            "scopeSelector": {
                "matchExpressions": [
                    {
                        "scopeName": "PriorityClass",
                        "operator": "In",
                        "values": [pool_priority_class(pool.metadata.name)],
                    }
                ]
            },
        },
    }


def network_policies(pool: TenantPool, namespace: str) -> list[dict[str, Any]]:
    name = pool.metadata.name
    pods = {"matchLabels": {POOL_LABEL: name}}
    access = pool.spec.access
    callers: list[dict[str, Any]] = []
    if access.gateway_namespaces:
        callers.append(_namespaces(list(access.gateway_namespaces)))
    if access.allow_same_namespace:
        callers.append({"podSelector": {}})  # any pod of this namespace

    def policy(suffix: str, spec: dict[str, Any]) -> dict[str, Any]:
        return {
            "apiVersion": "networking.k8s.io/v1",
            "kind": "NetworkPolicy",
            "metadata": _meta(pool, f"shoal-{name}-{suffix}", namespace),
            "spec": {"podSelector": pods, **spec},
        }

    out = [
        # Nothing reaches the pool's pods, and they reach nothing, unless allowed below.
        policy("default-deny", {"policyTypes": ["Ingress", "Egress"]}),
        policy(
            "allow-dns",
            {
                "policyTypes": ["Egress"],
                "egress": [
                    {
                        "to": [
                            {
                                **_namespaces([DNS_NAMESPACE]),
                                "podSelector": {"matchLabels": DNS_POD_LABELS},
                            }
                        ],
                        "ports": [{"protocol": "UDP", "port": 53}, {"protocol": "TCP", "port": 53}],
                    }
                ],
            },
        ),
        # Model files come from object storage over HTTPS (the fetch init container).
        policy(
            "allow-model-download",
            {
                "policyTypes": ["Egress"],
                "egress": [{"ports": [{"protocol": "TCP", "port": 443}]}],
            },
        ),
    ]
    if callers:
        out.append(
            policy(
                "allow-callers",
                {
                    "policyTypes": ["Ingress"],
                    "ingress": [
                        {
                            "from": callers,
                            "ports": [
                                {"protocol": "TCP", "port": HTTP_PORT},
                                {"protocol": "TCP", "port": GRPC_PORT},
                            ],
                        }
                    ],
                },
            )
        )
    if access.monitoring_namespaces:
        out.append(
            policy(
                "allow-metrics",
                {
                    "policyTypes": ["Ingress"],
                    "ingress": [
                        {
                            "from": [_namespaces(list(access.monitoring_namespaces))],
                            "ports": [{"protocol": "TCP", "port": METRICS_PORT}],
                        }
                    ],
                },
            )
        )
    return out


def tenant_objects(pool: TenantPool, namespace: str) -> list[dict[str, Any]]:
    return [resource_quota(pool, namespace), *network_policies(pool, namespace)]
