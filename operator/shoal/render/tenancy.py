"""What a TenantPool puts into each tenant namespace it admits: a ResourceQuota and
NetworkPolicies. Pure functions.

The quota is scoped to the pool's PriorityClass, so it counts exactly the pool's pods
(a namespace may belong to several pools). Network policies select the pool's model
pods and name namespaces only by the immutable ``kubernetes.io/metadata.name`` label,
never by labels a tenant can set on its own namespace.

Model pods run code their tenant supplied, so their egress is as narrow as their
ingress: DNS, and for pods whose model comes over the network, HTTPS to addresses
outside the cluster (or only an egress proxy). docs/network-isolation.md says why and
what an admin may need to add.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Sequence
from typing import Any

from shoal.api.constants import GATEWAY_LABEL
from shoal.api.tenantpool import TenantPool
from shoal.render.names import (
    GRPC_PORT,
    HTTP_PORT,
    MANAGED_BY,
    METRICS_PORT,
    MODEL_SOURCE_LABEL,
    POOL_LABEL,
    owner_references,
    pool_priority_class,
)

NAME_LABEL = "kubernetes.io/metadata.name"
DNS_NAMESPACE = "kube-system"
DNS_POD_LABELS = {"k8s-app": "kube-dns"}
HTTPS_PORT = 443

#: Networks a model download must never reach when neither the operator's settings nor
#: the pool say what the cluster's ranges are: every private (RFC 1918), shared (RFC
#: 6598, used by some CNIs and clouds for pods) and unique-local IPv6 address. A cluster
#: whose pods, Services, nodes or API server use public addresses must list them.
DEFAULT_CLUSTER_CIDRS: tuple[str, ...] = (
    "10.0.0.0/8",
    "172.16.0.0/12",
    "192.168.0.0/16",
    "100.64.0.0/10",
    "fc00::/7",
)

#: Closed to downloads whatever the cluster's ranges are said to be: link-local (cloud
#: instance metadata at 169.254.169.254, the EKS Pod Identity agent at 169.254.170.23,
#: NodeLocal DNSCache at 169.254.20.10, ...), and the instance-metadata addresses
#: outside it: AWS's IPv6 metadata and Pod Identity endpoints, GCE's IPv6 metadata
#: server, Alibaba Cloud's metadata server.
ALWAYS_CLOSED_CIDRS: tuple[str, ...] = (
    "169.254.0.0/16",
    "fe80::/10",
    "fd00:ec2::254/128",
    "fd00:ec2::23/128",
    "fd20:ce::254/128",
    "100.100.100.200/32",
)


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


def named_namespaces(names: Iterable[str]) -> dict[str, Any]:
    """A label selector for exactly the namespaces ``names``, by their immutable name
    label (a tenant cannot label its way in)."""
    return {"matchExpressions": [{"key": NAME_LABEL, "operator": "In", "values": sorted(names)}]}


def namespace_peer(names: Iterable[str]) -> dict[str, Any]:
    """A NetworkPolicy peer: the namespaces ``names``."""
    return {"namespaceSelector": named_namespaces(names)}


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


def outside_cluster(cluster_cidrs: Sequence[str]) -> list[dict[str, Any]]:
    """ipBlock peers for every address except ``cluster_cidrs`` and the always-closed
    ones, IPv4 and IPv6; a family the excepted networks cover entirely is left out."""
    closed = [ipaddress.ip_network(c) for c in (*cluster_cidrs, *ALWAYS_CLOSED_CIDRS)]
    v4 = ipaddress.collapse_addresses(n for n in closed if isinstance(n, ipaddress.IPv4Network))
    v6 = ipaddress.collapse_addresses(n for n in closed if isinstance(n, ipaddress.IPv6Network))
    out = []
    for everything, excepted in (
        ("0.0.0.0/0", [str(n) for n in v4]),
        ("::/0", [str(n) for n in v6]),
    ):
        if everything in excepted:
            continue  # an ipBlock's exceptions must lie strictly inside it
        out.append({"ipBlock": {"cidr": everything, "except": excepted}})
    return out


def _selector(selector: dict[str, Any]) -> dict[str, Any]:
    """A label selector without its empty parts (the API server drops them)."""
    return {k: v for k, v in selector.items() if v}


def _download_egress(pool: TenantPool, cluster_cidrs: Sequence[str]) -> list[dict[str, Any]]:
    """The egress rules of model downloads; none in mode None."""
    download = pool.spec.access.model_download
    if download.mode == "None":
        return []
    rules: list[dict[str, Any]] = []
    if download.mode == "Proxy":
        assert download.proxy is not None  # the API's rules say so
        proxy = download.proxy
        rules.append(
            {
                "to": [
                    {
                        **namespace_peer([proxy.namespace]),
                        "podSelector": _selector(proxy.pod_selector.to_wire()),
                    }
                ],
                "ports": [{"protocol": "TCP", "port": proxy.port}],
            }
        )
    else:
        ranges = download.cluster_cidrs if download.cluster_cidrs is not None else cluster_cidrs
        blocks = outside_cluster(ranges)
        if blocks:
            rules.append({"to": blocks, "ports": [{"protocol": "TCP", "port": HTTPS_PORT}]})
    for extra in download.extra_destinations:
        rules.append(
            {
                "to": [{"ipBlock": {"cidr": extra.cidr}}],
                "ports": [{"protocol": extra.protocol, "port": extra.port}],
            }
        )
    return rules


def _policy(
    pool: TenantPool,
    namespace: str,
    suffix: str,
    spec: dict[str, Any],
    pod_labels: dict[str, str] | None = None,
) -> dict[str, Any]:
    """A NetworkPolicy for the pool's pods (those of them with ``pod_labels`` too)."""
    labels = {POOL_LABEL: pool.metadata.name, **(pod_labels or {})}
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": _meta(pool, f"shoal-{pool.metadata.name}-{suffix}", namespace),
        "spec": {"podSelector": {"matchLabels": labels}, **spec},
    }


def default_deny(pool: TenantPool, namespace: str) -> dict[str, Any]:
    """Nothing reaches the pool's pods, and they reach nothing, unless another policy
    allows it."""
    return _policy(pool, namespace, "default-deny", {"policyTypes": ["Ingress", "Egress"]})


def network_policies(
    pool: TenantPool,
    namespace: str,
    cluster_cidrs: Sequence[str] = DEFAULT_CLUSTER_CIDRS,
    gateway_namespace: str | None = None,
) -> list[dict[str, Any]]:
    """The pool's NetworkPolicies in one tenant namespace it admits.

    ``cluster_cidrs``: the cluster's pod, Service and node ranges (and the API server's
    address), which Direct-mode downloads must not reach; the pool's
    ``access.modelDownload.clusterCIDRs`` wins over it. ``gateway_namespace``: where the
    pool's gateway runs, whose pods (and only the pool's) may call the models.
    """
    access = pool.spec.access
    callers: list[dict[str, Any]] = []
    if gateway_namespace and pool.spec.gateway.enabled:
        callers.append(
            {
                **namespace_peer([gateway_namespace]),
                "podSelector": {"matchLabels": {GATEWAY_LABEL: pool.metadata.name}},
            }
        )
    if access.gateway_namespaces:
        callers.append(namespace_peer(list(access.gateway_namespaces)))
    if access.allow_same_namespace:
        callers.append({"podSelector": {}})  # any pod of this namespace

    def policy(suffix: str, spec: dict[str, Any]) -> dict[str, Any]:
        return _policy(pool, namespace, suffix, spec)

    out = [
        default_deny(pool, namespace),
        policy(
            "allow-dns",
            {
                "policyTypes": ["Egress"],
                "egress": [
                    {
                        "to": [
                            {
                                **namespace_peer([DNS_NAMESPACE]),
                                "podSelector": {"matchLabels": DNS_POD_LABELS},
                            }
                        ],
                        "ports": [{"protocol": "UDP", "port": 53}, {"protocol": "TCP", "port": 53}],
                    }
                ],
            },
        ),
    ]
    download = _download_egress(pool, cluster_cidrs)
    if download:
        # Model files come from object storage over HTTPS (the fetch init container),
        # for the pods whose model comes over the network: a pvc:// model needs none.
        out.append(
            _policy(
                pool,
                namespace,
                "allow-model-download",
                {"policyTypes": ["Egress"], "egress": download},
                pod_labels={MODEL_SOURCE_LABEL: "network"},
            )
        )
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
                            "from": [namespace_peer(list(access.monitoring_namespaces))],
                            "ports": [{"protocol": "TCP", "port": METRICS_PORT}],
                        }
                    ],
                },
            )
        )
    return out


def tenant_objects(
    pool: TenantPool,
    namespace: str,
    cluster_cidrs: Sequence[str] = DEFAULT_CLUSTER_CIDRS,
    gateway_namespace: str | None = None,
) -> list[dict[str, Any]]:
    """What the pool keeps in a tenant namespace it admits."""
    return [
        resource_quota(pool, namespace),
        *network_policies(pool, namespace, cluster_cidrs, gateway_namespace),
    ]


def withdrawn_namespace_objects(pool: TenantPool, namespace: str) -> list[dict[str, Any]]:
    """What must stay in a namespace the pool no longer admits while any of the pool's
    pods (label ``shoal.dev/pool=<pool>``) still run there.

    The default-deny policy (the same object as before, so applying it changes nothing
    and there is no moment without it): the pods are reached by nothing and reach
    nothing, DNS included, until they are gone; every allow policy goes. And the quota,
    unchanged, so withdrawal never lifts a limit on the pods that remain. Once no pod of
    the pool is left, delete these too.
    """
    return [resource_quota(pool, namespace), default_deny(pool, namespace)]


def withdrawn_namespaces(
    pool: TenantPool, admitted: Iterable[str], pods: Iterable[dict[str, Any]]
) -> list[str]:
    """Namespaces that still hold the pool's pods but that the pool no longer admits:
    where :func:`withdrawn_namespace_objects` must stay. ``pods``: the cluster's pods
    labelled ``shoal.dev/pool=<pool>`` (terminating ones included: they still run)."""
    keep = set(admitted)
    return sorted(
        {
            meta["namespace"]
            for pod in pods
            if (meta := pod.get("metadata") or {}).get("namespace")
            and (meta.get("labels") or {}).get(POOL_LABEL) == pool.metadata.name
            and meta["namespace"] not in keep
        }
    )
