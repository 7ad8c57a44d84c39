"""Every kind the operator watches, and how its watch is filtered on the server.

The custom kinds and Namespaces are watched whole. The children are watched only as far
as a label selector the API server applies: the objects Shoal created (its managed-by
label), the EndpointSlices of its models' Services (which carry the Service's labels),
and its gateways' pods.
"""

from __future__ import annotations

from dataclasses import dataclass

from shoal.api.constants import GATEWAY_LABEL, GROUP, MANAGED_BY, MANAGED_BY_LABEL, POOL_LABEL
from shoal.api.constants import VERSION as API_VERSION_NAME

MANAGED_SELECTOR = f"{MANAGED_BY_LABEL}={MANAGED_BY}"


@dataclass(frozen=True)
class Watched:
    group: str
    version: str
    plural: str
    kind: str
    # The API server's label selector for the watch; "" watches every object.
    selector: str = ""

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version


# Indexed: the cache holds all of them before any pass runs (see shoal.handlers).
INDEXED = (
    Watched(GROUP, API_VERSION_NAME, "inferencemodels", "InferenceModel"),
    Watched(GROUP, API_VERSION_NAME, "tenantpools", "TenantPool"),
    Watched(GROUP, API_VERSION_NAME, "batchpolicies", "BatchPolicy"),
    Watched("", "v1", "namespaces", "Namespace"),
)
CHILDREN = (
    Watched("apps", "v1", "deployments", "Deployment", MANAGED_SELECTOR),
    Watched("", "v1", "services", "Service", MANAGED_SELECTOR),
    Watched("", "v1", "configmaps", "ConfigMap", MANAGED_SELECTOR),
    Watched("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget", MANAGED_SELECTOR),
    Watched(
        "autoscaling", "v2", "horizontalpodautoscalers", "HorizontalPodAutoscaler", MANAGED_SELECTOR
    ),
    Watched("", "v1", "resourcequotas", "ResourceQuota", MANAGED_SELECTOR),
    Watched("networking.k8s.io", "v1", "networkpolicies", "NetworkPolicy", MANAGED_SELECTOR),
    Watched("scheduling.k8s.io", "v1", "priorityclasses", "PriorityClass", MANAGED_SELECTOR),
    # Which replicas of a model are ready: the gateway routes to them.
    Watched("discovery.k8s.io", "v1", "endpointslices", "EndpointSlice", POOL_LABEL),
    # A gateway's own replicas: they share their limits (HAProxy peers).
    Watched("", "v1", "pods", "Pod", GATEWAY_LABEL),
)
