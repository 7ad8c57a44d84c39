"""REST paths of the kinds the operator reads and writes."""

from __future__ import annotations

from typing import Any

from shoal.api.constants import KUEUE_API_VERSION

# (apiVersion, kind) -> (plural, namespaced)
KINDS: dict[tuple[str, str], tuple[str, bool]] = {
    ("v1", "ConfigMap"): ("configmaps", True),
    ("v1", "Service"): ("services", True),
    ("v1", "ResourceQuota"): ("resourcequotas", True),
    ("v1", "Event"): ("events", True),
    ("v1", "Pod"): ("pods", True),
    ("v1", "Namespace"): ("namespaces", False),
    ("apps/v1", "Deployment"): ("deployments", True),
    ("policy/v1", "PodDisruptionBudget"): ("poddisruptionbudgets", True),
    ("autoscaling/v2", "HorizontalPodAutoscaler"): ("horizontalpodautoscalers", True),
    ("networking.k8s.io/v1", "NetworkPolicy"): ("networkpolicies", True),
    ("scheduling.k8s.io/v1", "PriorityClass"): ("priorityclasses", False),
    ("shoal.dev/v1alpha1", "InferenceModel"): ("inferencemodels", True),
    ("shoal.dev/v1alpha1", "TenantPool"): ("tenantpools", False),
    ("shoal.dev/v1alpha1", "BatchPolicy"): ("batchpolicies", True),
    (KUEUE_API_VERSION, "ResourceFlavor"): ("resourceflavors", False),
    (KUEUE_API_VERSION, "ClusterQueue"): ("clusterqueues", False),
    (KUEUE_API_VERSION, "LocalQueue"): ("localqueues", True),
    (KUEUE_API_VERSION, "Workload"): ("workloads", True),
}


def collection_path(api_version: str, kind: str, namespace: str | None) -> str:
    """A collection in one namespace, or across all of them when namespace is None."""
    plural, namespaced = KINDS[(api_version, kind)]
    base = f"/api/{api_version}" if "/" not in api_version else f"/apis/{api_version}"
    if namespaced and namespace:
        return f"{base}/namespaces/{namespace}/{plural}"
    return f"{base}/{plural}"


def object_path(api_version: str, kind: str, name: str, namespace: str | None = None) -> str:
    if KINDS[(api_version, kind)][1] and not namespace:
        raise ValueError(f"{kind} {name} is namespaced: a namespace is needed")
    return f"{collection_path(api_version, kind, namespace)}/{name}"


def path_of(obj: dict[str, Any]) -> str:
    meta = obj["metadata"]
    return object_path(obj["apiVersion"], obj["kind"], meta["name"], meta.get("namespace"))
