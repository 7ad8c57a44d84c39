"""A pool's elastic capacity as Kueue objects (pure): a ResourceFlavor for where its
pods run, a ClusterQueue with its nominal GPUs in its cohort, and a LocalQueue in each
tenant namespace it admits, which its models' pods name.

A pool's flavor carries its placement (node labels and tolerations). Its ClusterQueue
lists its own flavor first, with its nominal GPUs, then every other flavor of its
cohort with none: a replica that does not fit the pool's own GPUs borrows a lender's,
and Kueue places it on the lender's nodes by that flavor. The model's pod template
therefore carries no pool placement in this mode: the admitted flavor supplies it.

A pool's nominal GPUs may change by time window (``capacity.windows``): the ClusterQueue
is rendered for a moment, and the pool is looked at again when a window opens or closes.

CPU and memory are covered only because Kueue admits nothing that requests a resource
its ClusterQueue does not cover; GPUs are what a pool governs, so their quotas are set
beyond any cluster (the node's allocatable still bounds them).
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from shoal.api.constants import KUEUE_API_VERSION, MANAGED_BY, MANAGED_BY_LABEL, POOL_LABEL
from shoal.api.inferencemodel import Runtime, Scaling
from shoal.api.tenantpool import Capacity, TenantPool
from shoal.render.names import owner_references
from shoal.render.schedule import is_open, next_window_change
from shoal.render.tenancy import NAME_LABEL, named_namespaces
from shoal.render.workload import GPU, GPU_PRODUCT_LABEL

# Quotas of the resources a pool does not govern: far beyond any cluster, yet their sum
# over a large cohort stays within Kueue's 64-bit milli-units.
UNGOVERNED = {"cpu": "100000", "memory": "1Pi"}
# No namespace lacks its name label: a ClusterQueue that admits no namespace yet.
NO_NAMESPACE = {"matchExpressions": [{"key": NAME_LABEL, "operator": "DoesNotExist"}]}


def queue_name(pool_name: str) -> str:
    """The name of a pool's ClusterQueue, ResourceFlavor and LocalQueues."""
    return f"shoal-{pool_name}"


def model_queue(pool: TenantPool, kueue_served: Callable[[], bool]) -> str | None:
    """The LocalQueue a model's pods name: its pool's, where the pool's capacity is
    elastic and Kueue serves it. Kueue is asked about only for such a pool, so models of
    other pools never wait on (or fail with) the discovery request."""
    if pool.spec.capacity is None or not kueue_served():
        return None
    return queue_name(pool.metadata.name)


@dataclass(frozen=True)
class Nominal:
    """A pool's nominal GPUs at a moment, and the capacity window that set them."""

    gpus: int
    window: str | None = None


def nominal_at(capacity: Capacity, now: dt.datetime) -> Nominal:
    """The first open window's GPUs, else the pool's own (pure)."""
    for window in capacity.windows:
        if is_open(window, now):
            return Nominal(window.gpus, window.name)
    return Nominal(capacity.gpus)


def next_capacity_change(capacity: Capacity | None, now: dt.datetime) -> dt.datetime | None:
    """When a capacity window next opens or closes (None: the pool has none)."""
    return next_window_change(capacity.windows, now) if capacity is not None else None


def gpu_ceiling(pool: TenantPool, now: dt.datetime) -> int | None:
    """The GPUs one of the pool's models can ever be admitted to, where Kueue governs
    the pool: its nominal GPUs now, if it borrows from no cohort (None: no ceiling, the
    pool may borrow or its quotas are hard). A model's HPA stops there, so that when a
    window lowers the quota the replicas above it are scaled down (their termination
    grace period and Triton's drain) instead of staying admitted above the quota, which
    Kueue would allow."""
    capacity = pool.spec.capacity
    if capacity is None or capacity.cohort is not None:
        return None
    return nominal_at(capacity, now).gpus


def warm_pool_gpus(spec: Mapping[str, Any]) -> int:
    """The GPUs a model's warm pool holds whatever the load (pure, from its stored spec,
    which is not parsed: every model pass of the pool reads every other's):
    ``minReplicas`` times the GPUs per replica, with the API's defaults."""
    scaling = spec.get("scaling") or {}
    replicas = scaling.get("minReplicas", Scaling.model_fields["min_replicas"].default)
    return int(replicas) * replica_gpus(spec)


def replica_gpus(spec: Mapping[str, Any]) -> int:
    """The GPUs one replica of a model holds (from its stored spec, the API's default)."""
    runtime = spec.get("runtime") or {}
    return int(runtime.get("gpus", Runtime.model_fields["gpus"].default))


@dataclass(frozen=True)
class Holding:
    """One model of a pool without a cohort, in GPUs: its warm pool, and what its
    available replicas (admitted and running) hold now."""

    key: tuple[str, str]  # (namespace, name)
    warm: int
    held: int


def model_gpu_ceilings(pool_gpus: int, models: Sequence[Holding]) -> dict[tuple[str, str], int]:
    """The GPUs each model of a pool without a cohort may grow to (pure). Each model's
    HPA stops there, so a window that lowers the quota scales the models down towards
    it instead of leaving them above it, which Kueue would allow.

    Within the quota, a model may grow into everything but the others' warm pools: the
    models share what is above their warm pools as their load asks, and a replica that
    finds it taken waits for quota (Kueue's gate). Above it (a window lowered it under
    what runs), the models above their warm pools give the excess back in proportion
    to what each holds above its warm pool (largest remainders first, ties by name),
    never below their warm pools, so together they come down to the quota, not below
    it: each model's own share alone would leave two that both grew above their warm
    pools over the quota. The HPA works in whole replicas: a model of several GPUs a
    replica gives back whole replicas."""
    warm_total = sum(m.warm for m in models)
    share = {m.key: max(0, pool_gpus - (warm_total - m.warm)) for m in models}
    over = sum(max(m.held, m.warm) for m in models) - pool_gpus
    above = {m.key: max(0, m.held - m.warm) for m in models}
    spare = sum(above.values())
    if over <= 0 or spare == 0:
        return share
    give = min(over, spare)
    exact = {key: give * gpus / spare for key, gpus in above.items()}
    back = {key: math.floor(value) for key, value in exact.items()}
    rest = give - sum(back.values())
    for key in sorted(exact, key=lambda k: (back[k] - exact[k], k))[:rest]:
        back[key] += 1
    return {m.key: min(share[m.key], max(m.held, m.warm) - back[m.key]) for m in models}


def parked(pool_gpus: int, replica_gpus: int) -> bool:
    """Whether a model of a pool without a cohort runs no replica now (pure): the pool
    has fewer GPUs now than one replica needs (a window of ``gpus: 0``, say). Its share
    alone is not enough: where the others' warm pools take the whole window, one
    replica may still be admitted in the GPUs another leaves unused."""
    return replica_gpus > 0 and pool_gpus < replica_gpus


def _metadata(pool: TenantPool, namespace: str | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": queue_name(pool.metadata.name),
        "labels": {MANAGED_BY_LABEL: MANAGED_BY, POOL_LABEL: pool.metadata.name},
    }
    if namespace is not None:
        meta["namespace"] = namespace
    owners = owner_references("TenantPool", pool.metadata.name, pool.metadata.uid)
    if owners:
        meta["ownerReferences"] = owners
    return meta


def resource_flavor(pool: TenantPool) -> dict[str, Any]:
    """Where the pool's GPUs are: its placement, given to the replicas Kueue admits on
    them, the pool's own and those that borrow them."""
    placement = pool.spec.placement
    labels = dict(placement.node_selector)
    if placement.gpu_product:
        labels[GPU_PRODUCT_LABEL] = placement.gpu_product
    spec: dict[str, Any] = {}
    if labels:
        spec["nodeLabels"] = labels
    if placement.tolerations:
        spec["tolerations"] = [t.to_wire() for t in placement.tolerations]
    return {
        "apiVersion": KUEUE_API_VERSION,
        "kind": "ResourceFlavor",
        "metadata": _metadata(pool),
        "spec": spec,
    }


def _flavor_quotas(
    flavor: str, gpus: int, borrowing: int | None, lending: int | None, own: bool
) -> dict[str, Any]:
    gpu: dict[str, Any] = {"name": GPU, "nominalQuota": str(gpus)}
    if borrowing is not None:
        gpu["borrowingLimit"] = str(borrowing)
    if lending is not None:
        gpu["lendingLimit"] = str(lending)
    resources = [
        {"name": name, "nominalQuota": quota if own else "0"} for name, quota in UNGOVERNED.items()
    ]
    return {"name": flavor, "resources": [*resources, gpu]}


def cluster_queue(
    pool: TenantPool, cohort: Sequence[TenantPool], admitted: Sequence[str], nominal: Nominal
) -> dict[str, Any]:
    """The pool's ClusterQueue. ``cohort``: every pool with elastic capacity that names
    the same cohort (``pool`` itself may be among them); ``admitted``: the tenant
    namespaces whose LocalQueues may use it; ``nominal``: its GPUs now."""
    capacity = pool.spec.capacity
    assert capacity is not None
    name = pool.metadata.name
    # Kueue refuses a lending limit above the nominal quota: a window lends what it has.
    lending = capacity.lending_limit
    if lending is not None:
        lending = min(lending, nominal.gpus)
    flavors = [
        _flavor_quotas(queue_name(name), nominal.gpus, capacity.borrowing_limit, lending, True)
    ]
    if capacity.cohort is not None:
        lenders = sorted(p.metadata.name for p in cohort if p.metadata.name != name)
        flavors += [
            _flavor_quotas(queue_name(other), 0, capacity.borrowing_limit, None, False)
            for other in lenders
        ]
    selector = named_namespaces(admitted) if admitted else NO_NAMESPACE
    spec: dict[str, Any] = {
        "namespaceSelector": selector,
        "resourceGroups": [{"coveredResources": [*UNGOVERNED, GPU], "flavors": flavors}],
        # Lent GPUs come back by preemption of the borrowers; a pool's own replicas are
        # never preempted by another pool's.
        "preemption": {
            "reclaimWithinCohort": "Any",
            "withinClusterQueue": "LowerPriority",
            "borrowWithinCohort": {"policy": "Never"},
        },
    }
    if capacity.cohort is not None:
        spec["cohortName"] = capacity.cohort
        spec["fairSharing"] = {"weight": str(capacity.weight)}
    return {
        "apiVersion": KUEUE_API_VERSION,
        "kind": "ClusterQueue",
        "metadata": _metadata(pool),
        "spec": spec,
    }


def local_queue(pool: TenantPool, namespace: str) -> dict[str, Any]:
    """The queue a tenant namespace's model pods name to use the pool's capacity."""
    return {
        "apiVersion": KUEUE_API_VERSION,
        "kind": "LocalQueue",
        "metadata": _metadata(pool, namespace),
        "spec": {"clusterQueue": queue_name(pool.metadata.name)},
    }


def elastic_objects(
    pool: TenantPool, cohort: Sequence[TenantPool], admitted: Sequence[str], nominal: Nominal
) -> list[dict[str, Any]]:
    """Everything Kueue needs for the pool, flavor first (a ClusterQueue names it)."""
    return [
        resource_flavor(pool),
        cluster_queue(pool, cohort, admitted, nominal),
        *(local_queue(pool, namespace) for namespace in sorted(admitted)),
    ]


def capacity_figures(pool_name: str, queues: Sequence[dict[str, Any]]) -> dict[str, int]:
    """GPUs in use, borrowed and lent, and replicas waiting, from the live ClusterQueues
    of the pool's cohort (pure). ``queues``: Shoal's ClusterQueues, the pool's included."""
    own = queue_name(pool_name)
    in_use = borrowed = lent = waiting = 0
    for queue in queues:
        status = queue.get("status") or {}
        mine = queue["metadata"]["name"] == own
        if mine:
            waiting = int(status.get("pendingWorkloads") or 0)
        for flavor in status.get("flavorsUsage") or []:
            for resource in flavor.get("resources") or []:
                if resource.get("name") != GPU:
                    continue
                total = count(resource.get("total"))
                if mine:
                    in_use += total
                    borrowed += count(resource.get("borrowed"))
                elif flavor.get("name") == own:
                    lent += total
    return {
        "inUseGpus": in_use,
        "borrowedGpus": borrowed,
        "lentGpus": lent,
        "waitingReplicas": waiting,
    }


def count(quantity: object) -> int:
    """A whole-GPU quantity as Kueue prints it ("3", or "0" when absent)."""
    return int(str(quantity or "0"))
