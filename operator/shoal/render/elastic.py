"""A pool's elastic capacity as Kueue objects (pure): a ResourceFlavor for where its
pods run, a ClusterQueue with its nominal GPUs in its cohort, and a LocalQueue in each
tenant namespace it admits, which its models' pods name.

A pool's flavor carries its placement (node labels and tolerations). Its ClusterQueue
lists its own flavor first, with its nominal GPUs, then every other flavor of its
cohort with none: a replica that does not fit the pool's own GPUs borrows a lender's,
and Kueue places it on the lender's nodes by that flavor. The model's pod template
therefore carries no pool placement in this mode: the admitted flavor supplies it.

CPU and memory are covered only because Kueue admits nothing that requests a resource
its ClusterQueue does not cover; GPUs are what a pool governs, so their quotas are set
beyond any cluster (the node's allocatable still bounds them).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from shoal.api.constants import KUEUE_API_VERSION, MANAGED_BY, MANAGED_BY_LABEL, POOL_LABEL
from shoal.api.tenantpool import TenantPool
from shoal.render.names import owner_references
from shoal.render.tenancy import NAME_LABEL, named_namespaces
from shoal.render.workload import GPU

# Quotas of the resources a pool does not govern: far beyond any cluster, yet their sum
# over a large cohort stays within Kueue's 64-bit milli-units.
UNGOVERNED = {"cpu": "100000", "memory": "1Pi"}
# No namespace lacks its name label: a ClusterQueue that admits no namespace yet.
NO_NAMESPACE = {"matchExpressions": [{"key": NAME_LABEL, "operator": "DoesNotExist"}]}


def queue_name(pool_name: str) -> str:
    """The name of a pool's ClusterQueue, ResourceFlavor and LocalQueues."""
    return f"shoal-{pool_name}"


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
        labels["nvidia.com/gpu.product"] = placement.gpu_product
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
    pool: TenantPool, cohort: Sequence[TenantPool], admitted: Sequence[str]
) -> dict[str, Any]:
    """The pool's ClusterQueue. ``cohort``: every pool with elastic capacity that names
    the same cohort (``pool`` itself may be among them); ``admitted``: the tenant
    namespaces whose LocalQueues may use it."""
    capacity = pool.spec.capacity
    assert capacity is not None
    name = pool.metadata.name
    flavors = [
        _flavor_quotas(
            queue_name(name), capacity.gpus, capacity.borrowing_limit, capacity.lending_limit, True
        )
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
    pool: TenantPool, cohort: Sequence[TenantPool], admitted: Sequence[str]
) -> list[dict[str, Any]]:
    """Everything Kueue needs for the pool, flavor first (a ClusterQueue names it)."""
    return [
        resource_flavor(pool),
        cluster_queue(pool, cohort, admitted),
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
                total = _count(resource.get("total"))
                if mine:
                    in_use += total
                    borrowed += _count(resource.get("borrowed"))
                elif flavor.get("name") == own:
                    lent += total
    return {
        "inUseGpus": in_use,
        "borrowedGpus": borrowed,
        "lentGpus": lent,
        "waitingReplicas": waiting,
    }


def _count(quantity: object) -> int:
    """A whole-GPU quantity as Kueue prints it ("3", or "0" when absent)."""
    return int(str(quantity or "0"))
