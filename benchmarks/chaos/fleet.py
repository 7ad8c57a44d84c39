"""The workload the chaos scenarios fault, and the exact end state it must reach.

A fleet is N InferenceModels spread round-robin over the first namespaces of the
control-plane benchmark's tenant namespaces, in its four pools (two shared, two
dedicated). Its end state is checked exactly, not sampled: every model Ready at its
current generation, and the set of objects Shoal manages in the cluster equal to the
set a fresh render of the pools and models names: a missing child, a second copy, an
orphan left by a deleted model or a duplicate PriorityClass, quota or policy all show
as a difference.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

import httpx

from benchmarks import control_plane as bench
from shoal.api.constants import MANAGED_BY, MANAGED_BY_LABEL
from shoal.api.inferencemodel import InferenceModel
from shoal.api.kinds import KINDS
from shoal.api.tenantpool import TenantPool
from shoal.kube.paths import collection_path
from shoal.render.desired import model_objects, pool_objects
from shoal.render.tenancy import tenant_objects
from shoal.settings import Settings

# Where each kind Shoal renders is listed, cluster-wide (Kueue's aside: the fleet has
# no elastic pool).
CHILD_PATHS = {
    k.kind: collection_path(k.api_version, k.kind, None)
    for k in KINDS
    if k.planned_by and k.watch is not None
}
Key = tuple[str, str, str]  # kind, namespace ("" for cluster-scoped), name


def model(index: int, namespaces: int, max_replicas: int = 2) -> dict[str, Any]:
    """Model ``index`` of a fleet over ``namespaces`` namespaces."""
    ns_index = index % namespaces
    doc = bench.model(index)
    doc["metadata"]["namespace"] = bench.namespace_names()[ns_index]
    doc["spec"]["pool"] = bench.pool_of(ns_index)
    doc["spec"]["scaling"]["maxReplicas"] = max_replicas
    return doc


def rescaled(docs: list[dict[str, Any]], max_replicas: int) -> list[dict[str, Any]]:
    """The same models with another maxReplicas: a wave of updates."""
    out = copy.deepcopy(docs)
    for doc in out:
        doc["spec"]["scaling"]["maxReplicas"] = max_replicas
    return out


def _key(obj: dict[str, Any]) -> Key:
    meta = obj["metadata"]
    return obj["kind"], meta.get("namespace") or "", meta["name"]


def expected_children(models: list[dict[str, Any]]) -> set[Key]:
    """What Shoal must keep for these models and the benchmark's pools: a fresh render."""
    settings = Settings()
    pools = {p["metadata"]["name"]: TenantPool.model_validate(p) for p in bench.pools()}
    out: set[Key] = set()
    for pool in pools.values():
        out |= {_key(o) for o in pool_objects(pool)}
        for namespace in pool.spec.tenants.namespaces:
            rendered = tenant_objects(
                pool, namespace, settings.cluster_cidrs, settings.gateway_namespace
            )
            out |= {_key(o) for o in rendered}
    for doc in models:
        im = InferenceModel.model_validate(doc)
        out |= {_key(o) for o in model_objects(im, None, pools[im.spec.pool])}
    return out


def live_children(http: httpx.Client) -> set[Key]:
    """Every object carrying Shoal's managed-by label, of the kinds it renders."""
    out: set[Key] = set()
    selector = {"labelSelector": f"{MANAGED_BY_LABEL}={MANAGED_BY}"}
    for kind, path in CHILD_PATHS.items():
        items = http.get(path, params=selector).raise_for_status().json()["items"]
        out |= {(kind, i["metadata"].get("namespace") or "", i["metadata"]["name"]) for i in items}
    return out


@dataclass
class EndState:
    """What the cluster holds against what the fleet must converge to."""

    models: int
    ready: int
    current: int  # status.observedGeneration == metadata.generation
    missing: list[Key] = field(default_factory=list)
    extra: list[Key] = field(default_factory=list)  # orphans and duplicates
    stale_pools: list[str] = field(default_factory=list)

    @property
    def converged(self) -> bool:
        exact = not self.missing and not self.extra and not self.stale_pools
        return self.ready == self.current == self.models and exact

    def __str__(self) -> str:
        return (
            f"{self.ready}/{self.models} Ready, {self.current} current, "
            f"missing {self.missing[:5]} ({len(self.missing)}), "
            f"extra {self.extra[:5]} ({len(self.extra)}), pools miscounted {self.stale_pools}"
        )


def end_state(
    http: httpx.Client, expected_models: list[dict[str, Any]], autoscaled: bool = True
) -> EndState:
    """The cluster's models and Shoal's children, against ``expected_models``. A model
    counts as Ready once its HPA's first evaluation has landed too (``autoscaled``): it
    changes the model's AutoscalerReady, a write that must not fall into a no-op
    window."""
    items = http.get(f"{bench.GROUP_PATH}/inferencemodels").raise_for_status().json()["items"]
    wanted = {(d["metadata"]["namespace"], d["metadata"]["name"]) for d in expected_models}
    ready = current = 0
    for item in items:
        meta, status = item["metadata"], item.get("status") or {}
        if (meta["namespace"], meta["name"]) not in wanted:
            continue
        if status.get("observedGeneration") == meta["generation"]:
            current += 1
        conditions = {c["type"]: c["status"] for c in status.get("conditions", [])}
        evaluated = conditions.get("AutoscalerReady") in ("True", "False")
        if conditions.get("Ready") == "True" and (evaluated or not autoscaled):
            ready += 1
    expected, live = expected_children(expected_models), live_children(http)
    pools = http.get(f"{bench.GROUP_PATH}/tenantpools").raise_for_status().json()["items"]
    return EndState(
        models=len(expected_models),
        ready=ready,
        current=current,
        missing=sorted(expected - live),
        extra=sorted(live - expected),
        stale_pools=sorted(stale_pool_usage(pools, items)),
    )


def stale_pool_usage(pools: list[dict[str, Any]], models: list[dict[str, Any]]) -> set[str]:
    """Pools whose status does not count their models and replicas as the models' own
    status does (pure)."""
    counted: dict[str, tuple[int, int]] = {}
    for item in models:
        pool = item["spec"]["pool"]
        number, replicas = counted.get(pool, (0, 0))
        counted[pool] = (
            number + 1,
            replicas + int((item.get("status") or {}).get("replicas") or 0),
        )
    stale = set()
    for pool in pools:
        name, status = pool["metadata"]["name"], pool.get("status") or {}
        if (status.get("models", 0), status.get("replicas", 0)) != counted.get(name, (0, 0)):
            stale.add(name)
    return stale
