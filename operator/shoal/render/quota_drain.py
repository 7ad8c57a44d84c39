"""Which replicas a pool in a cohort drains when a capacity window lowers its quota
below what they hold (pure functions).

Kueue leaves admitted replicas running when a ClusterQueue's nominal quota is lowered,
and in a cohort no other queue holds quota on the pool's own flavor to take them back.
So the pool evicts the replicas that hold its own GPUs beyond the new quota, but only
as many as the cohort has idle GPUs for their replacements to be admitted on: a replica
with nowhere to go keeps serving until the model scales down or GPUs free up. The
Eviction API then honours each model's PodDisruptionBudget.

Which flavor a replica holds is Kueue's record of its admission (the pod's Workload),
not the pod's node selector: two pools may share a placement, or have none.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from shoal.api.constants import KUEUE_ADMISSION_GATE, MODEL_LABEL
from shoal.api.tenantpool import TenantPool
from shoal.render.elastic import Nominal, count, queue_name
from shoal.render.pods import is_ready
from shoal.render.workload import GPU

FINISHED_PHASES = ("Succeeded", "Failed")


def _usage(queues: Sequence[dict[str, Any]]) -> dict[tuple[str, str], int]:
    """GPUs in use per (ClusterQueue, flavor), from the queues' statuses."""
    out: dict[tuple[str, str], int] = {}
    for queue in queues:
        for flavor in (queue.get("status") or {}).get("flavorsUsage") or []:
            for resource in flavor.get("resources") or []:
                if resource.get("name") == GPU:
                    key = (queue["metadata"]["name"], str(flavor.get("name")))
                    out[key] = count(resource.get("total"))
    return out


def own_flavor_excess(pool_name: str, nominal_gpus: int, queues: Sequence[dict[str, Any]]) -> int:
    """GPUs of its own flavor the pool's replicas hold beyond its nominal quota, per its
    ClusterQueue's status."""
    own = queue_name(pool_name)
    return max(_usage(queues).get((own, own), 0) - nominal_gpus, 0)


def room_to_borrow(
    pool: TenantPool,
    lenders: Mapping[str, tuple[TenantPool, Nominal]],
    queues: Sequence[dict[str, Any]],
) -> int:
    """The idle GPUs of the other cohort members ``pool`` may borrow now: per lender,
    its nominal GPUs no one uses, within its lending limit and the pool's borrowing
    limit. An estimate of what Kueue will admit (fair sharing may still choose another
    borrower first)."""
    capacity = pool.spec.capacity
    assert capacity is not None
    usage = _usage(queues)
    me = queue_name(pool.metadata.name)
    room = 0
    for name, (lender, nominal) in lenders.items():
        if name == pool.metadata.name or lender.spec.capacity is None:
            continue
        flavor = queue_name(name)
        on_flavor = {q: used for (q, f), used in usage.items() if f == flavor}
        free = nominal.gpus - sum(on_flavor.values())
        lending = lender.spec.capacity.lending_limit
        if lending is not None:
            lent = sum(used for q, used in on_flavor.items() if q != flavor)
            free = min(free, min(lending, nominal.gpus) - lent)
        if capacity.borrowing_limit is not None:
            free = min(free, capacity.borrowing_limit - on_flavor.get(me, 0))
        room += max(free, 0)
    return room


def _gpus(pod: dict[str, Any]) -> int:
    return sum(
        int(str(((c.get("resources") or {}).get("requests") or {}).get(GPU, 0)))
        for c in (pod.get("spec") or {}).get("containers") or []
    )


def admitted_flavors(workloads: Sequence[dict[str, Any]]) -> dict[str, str]:
    """Pod uid -> the flavor Kueue admitted its GPUs on, from the pods' Workloads."""
    out: dict[str, str] = {}
    for workload in workloads:
        admission = (workload.get("status") or {}).get("admission") or {}
        flavors = [
            (a.get("flavors") or {}).get(GPU) for a in admission.get("podSetAssignments") or []
        ]
        flavor = next((f for f in flavors if f), None)
        if flavor is None:
            continue
        for owner in (workload.get("metadata") or {}).get("ownerReferences") or []:
            if owner.get("kind") == "Pod" and owner.get("uid"):
                out[str(owner["uid"])] = str(flavor)
    return out


def pods_to_drain(
    pool_name: str,
    pods: Sequence[dict[str, Any]],
    flavors: Mapping[str, str],
    nominal_gpus: int,
    room: int,
) -> list[dict[str, Any]]:
    """Of the pool's pods, those to evict so that the ones Kueue admitted on its own
    flavor hold no more than ``nominal_gpus``, each only if ``room`` is left for its
    replacement elsewhere. Not-ready replicas go first, then replicas of models with
    other ready ones (a single replica goes last), newest first within each. Counted
    from the pods, not from Kueue's usage, which still counts an evicted replica until
    its Workload finishes: a replica already terminating is gone for this count."""
    own = queue_name(pool_name)
    ready_per_model = Counter(
        (p["metadata"].get("namespace"), (p["metadata"].get("labels") or {}).get(MODEL_LABEL))
        for p in pods
        if is_ready(p)
    )
    held = []
    for pod in pods:
        meta, spec = pod.get("metadata") or {}, pod.get("spec") or {}
        gates = spec.get("schedulingGates") or []
        if (
            meta.get("deletionTimestamp")
            or (pod.get("status") or {}).get("phase") in FINISHED_PHASES
            or any(g.get("name") == KUEUE_ADMISSION_GATE for g in gates)
            or flavors.get(str(meta.get("uid"))) != own
        ):
            continue
        held.append(pod)
    excess = sum(_gpus(p) for p in held) - nominal_gpus

    def alone(pod: dict[str, Any]) -> bool:
        meta = pod["metadata"]
        model = (meta.get("namespace"), (meta.get("labels") or {}).get(MODEL_LABEL))
        return ready_per_model[model] < 2

    held.sort(key=lambda p: str(p["metadata"].get("creationTimestamp") or ""), reverse=True)
    held.sort(key=lambda p: (is_ready(p), alone(p)))  # stable: newest first within each
    out = []
    for pod in held:
        gpus = _gpus(pod)
        if excess <= 0:
            break
        if not gpus or gpus > room:
            continue
        out.append(pod)
        excess -= gpus
        room -= gpus
    return out
