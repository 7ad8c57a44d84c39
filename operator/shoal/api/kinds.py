"""Every kind of object the operator touches, in one table.

The REST paths (``shoal.kube.paths``), the watches and their label selectors
(``shoal.watched``), the ClusterRole (``manifests/base/rbac.yaml``, generated) and pruning
(``shoal.reconcile.prune``) all derive from :data:`KINDS`. A child kind a planner starts
to render is one entry here: ``tests/unit/test_kinds.py`` fails for a rendered kind that
is missing, or one whose entry does not name the planner that renders it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from shoal.api.constants import (
    GATEWAY_LABEL,
    GROUP,
    KUEUE_GROUP,
    KUEUE_VERSION,
    MANAGED_BY,
    MANAGED_BY_LABEL,
    POOL_LABEL,
    VERSION,
)

# The planners: each renders a set of children and prunes what it no longer renders.
MODEL: Final = "model"  # a model's serving stack, and its overflow twin's
POOL: Final = "pool"  # a pool's PriorityClass, and its quota and policies per namespace
GATEWAY: Final = "gateway"  # a pool's gateway
CAPACITY: Final = "capacity"  # a pool's elastic capacity on Kueue
PLANNERS: Final = (MODEL, POOL, GATEWAY, CAPACITY)

# What a planner does with its children: read them back, apply them (server-side apply is
# a patch, or a create for a new object), watch them for drift, prune them.
_OWNED: Final = ("get", "list", "watch", "create", "patch", "delete")
# Kueue's objects are not watched (Kueue may come later): read before every apply.
_OWNED_UNWATCHED: Final = ("get", "list", "create", "patch", "delete")
MANAGED_SELECTOR: Final = f"{MANAGED_BY_LABEL}={MANAGED_BY}"


@dataclass(frozen=True)
class Kind:
    """One kind: where it is served, what the operator may do with it and why, whether
    and how it is watched, and which planners render it."""

    group: str
    version: str
    kind: str
    plural: str
    namespaced: bool
    verbs: tuple[str, ...]
    why: str  # the ClusterRole's comment on its rule
    # The label selector of its watch ("" watches every object); None: not watched.
    watch: str | None = None
    planned_by: frozenset[str] = frozenset()
    # Subresources the operator writes (a custom resource's status).
    status_verbs: tuple[str, ...] = ()

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version


def _child(group: str, version: str, kind: str, plural: str, *planners: str, why: str) -> Kind:
    return Kind(
        group,
        version,
        kind,
        plural,
        namespaced=kind != "PriorityClass",
        verbs=_OWNED,
        why=why,
        watch=MANAGED_SELECTOR,
        planned_by=frozenset(planners),
    )


_CUSTOM_READ: Final = ("get", "list", "watch")

KINDS: Final[tuple[Kind, ...]] = (
    Kind(
        GROUP,
        VERSION,
        "InferenceModel",
        "inferencemodels",
        True,
        _CUSTOM_READ,
        "Watched and read; the operator writes its status only.",
        watch="",
        status_verbs=("get", "patch"),
    ),
    Kind(
        GROUP,
        VERSION,
        "TenantPool",
        "tenantpools",
        False,
        (*_CUSTOM_READ, "patch"),
        "Watched and read; patched for the operator's own finalizer on a pool that models "
        "still use.",
        watch="",
        status_verbs=("get", "patch"),
    ),
    Kind(
        GROUP,
        VERSION,
        "BatchPolicy",
        "batchpolicies",
        True,
        _CUSTOM_READ,
        "Watched and read; the operator writes its status only.",
        watch="",
        status_verbs=("get", "patch"),
    ),
    Kind(
        "apiextensions.k8s.io",
        "v1",
        "CustomResourceDefinition",
        "customresourcedefinitions",
        False,
        _CUSTOM_READ,
        "kopf discovers the custom resources it serves.",
    ),
    Kind(
        "",
        "v1",
        "Namespace",
        "namespaces",
        False,
        _CUSTOM_READ,
        "Which namespaces a pool admits.",
        watch="",
    ),
    _child(
        "",
        "v1",
        "ConfigMap",
        "configmaps",
        MODEL,
        GATEWAY,
        why="A model's Triton config; a gateway's haproxy.cfg, keys and tenants.",
    ),
    _child(
        "apps",
        "v1",
        "Deployment",
        "deployments",
        MODEL,
        GATEWAY,
        why="A model's Triton servers; a pool's gateway.",
    ),
    _child(
        "",
        "v1",
        "Service",
        "services",
        MODEL,
        GATEWAY,
        why="A model's and a gateway's Service.",
    ),
    _child(
        "policy",
        "v1",
        "PodDisruptionBudget",
        "poddisruptionbudgets",
        MODEL,
        GATEWAY,
        why="A model's and a gateway's disruption budget.",
    ),
    _child(
        "autoscaling",
        "v2",
        "HorizontalPodAutoscaler",
        "horizontalpodautoscalers",
        MODEL,
        why="A model's autoscaler on queue depth and P95 latency.",
    ),
    _child(
        "",
        "v1",
        "ResourceQuota",
        "resourcequotas",
        POOL,
        why="A pool's quota in each namespace it admits; removed from namespaces it releases.",
    ),
    _child(
        "networking.k8s.io",
        "v1",
        "NetworkPolicy",
        "networkpolicies",
        POOL,
        GATEWAY,
        MODEL,
        why="A pool's isolation per namespace, its gateway's, an overflow stack's.",
    ),
    _child(
        "scheduling.k8s.io",
        "v1",
        "PriorityClass",
        "priorityclasses",
        POOL,
        why="A pool's priority: replaced when it changes (its value cannot change in place).",
    ),
    Kind(
        "",
        "v1",
        "Pod",
        "pods",
        True,
        ("list", "watch"),
        "Why a model's pods do not run (for status), how long they took to start "
        "(predictive scaling's cold start); a pool's gateway replicas, watched (they "
        "share their limits as HAProxy peers).",
        watch=GATEWAY_LABEL,
    ),
    Kind(
        "discovery.k8s.io",
        "v1",
        "EndpointSlice",
        "endpointslices",
        True,
        ("list", "watch"),
        "Which replicas of a model are ready: its pool's gateway routes to them.",
        watch=POOL_LABEL,
    ),
    Kind(
        "",
        "v1",
        "Event",
        "events",
        True,
        ("create",),
        "Events on the objects it acts on.",
    ),
    Kind(
        KUEUE_GROUP,
        KUEUE_VERSION,
        "LocalQueue",
        "localqueues",
        True,
        _OWNED_UNWATCHED,
        "A pool's elastic capacity, where Kueue is installed; read before every apply "
        "(not watched), deleted when capacity is unset.",
        planned_by=frozenset({CAPACITY}),
    ),
    Kind(
        KUEUE_GROUP,
        KUEUE_VERSION,
        "ClusterQueue",
        "clusterqueues",
        False,
        _OWNED_UNWATCHED,
        "A pool's share of its cohort; its status gives the GPUs borrowed and lent.",
        planned_by=frozenset({CAPACITY}),
    ),
    Kind(
        KUEUE_GROUP,
        KUEUE_VERSION,
        "ResourceFlavor",
        "resourceflavors",
        False,
        _OWNED_UNWATCHED,
        "The nodes a pool's elastic capacity runs on.",
        planned_by=frozenset({CAPACITY}),
    ),
    Kind(
        KUEUE_GROUP,
        KUEUE_VERSION,
        "Workload",
        "workloads",
        True,
        ("list",),
        "Which flavor Kueue admitted a pod on, when a pool drains replicas above a quota "
        "its window lowered.",
    ),
)

# Access that is not a kind's: (the ClusterRole's comment, its rule).
EXTRA_RULES: Final[tuple[tuple[str, dict[str, list[str]]], ...]] = (
    (
        "A pool in a cohort whose capacity window lowered its quota drains the replicas "
        "above it through the Eviction API, which honours their PodDisruptionBudgets.",
        {"apiGroups": [""], "resources": ["pods/eviction"], "verbs": ["create"]},
    ),
    (
        "The cluster's service-account token issuer and signing keys: the gateways "
        "verify callers' tokens with them.",
        {
            "nonResourceURLs": ["/.well-known/openid-configuration", "/openid/v1/jwks"],
            "verbs": ["get"],
        },
    ),
)

_BY_NAME: Final = {(k.api_version, k.kind): k for k in KINDS}


def kind_of(api_version: str, kind: str) -> Kind:
    """The table's entry for a kind; KeyError for a kind the operator may not touch."""
    return _BY_NAME[(api_version, kind)]


def planned_by(planner: str) -> tuple[Kind, ...]:
    """The kinds ``planner`` renders, in the table's order."""
    return tuple(k for k in KINDS if planner in k.planned_by)


def watched() -> tuple[Kind, ...]:
    return tuple(k for k in KINDS if k.watch is not None)
