"""A pool's elastic capacity on the cluster: whether Kueue serves it, its Kueue objects
applied (and removed when the capacity is unset or a namespace released), and what the
ClusterQueues say about GPUs borrowed and lent."""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from shoal.api.conditions import Cond
from shoal.api.constants import (
    API_VERSION,
    KUEUE_API_VERSION,
    MANAGED_BY,
    MANAGED_BY_LABEL,
    POOL_LABEL,
)
from shoal.api.kinds import CAPACITY
from shoal.api.tenantpool import TenantPool
from shoal.kube.client import ApiError, Kube
from shoal.reconcile.prune import Owner, apply_and_prune
from shoal.render.elastic import (
    Nominal,
    capacity_figures,
    nominal_at,
    queue_name,
)
from shoal.render.pool_plan import cohort_of
from shoal.render.quota_drain import (
    admitted_flavors,
    own_flavor_excess,
    pods_to_drain,
    room_to_borrow,
)

log = logging.getLogger(__name__)

# How often a pool with elastic capacity looks again (Kueue's objects are not watched;
# Kueue may come).
RECHECK_SECONDS = 30.0
# How soon a pool holding GPUs beyond a lowered quota looks again: each eviction waits
# for the PodDisruptionBudget, i.e. for the previous replica's replacement.
DRAIN_SECONDS = 5.0


@dataclass(frozen=True)
class CapacityOutcome:
    """What a pool's capacity pass found: its ``status.capacity``, its ElasticCapacity
    condition, and how many replicas it evicted above a lowered quota (while it does,
    the pool looks again soon)."""

    status: dict[str, Any]
    condition: Cond
    evicted: int = 0


def capacity_owner(pool: str) -> Owner:
    return Owner(CAPACITY, {MANAGED_BY_LABEL: MANAGED_BY, POOL_LABEL: pool})


def _held(kube: Kube, owner: Owner) -> list[dict[str, Any]]:
    """The pool's Kueue objects, listed (nobody watches them: Kueue may come later)."""
    labels = ",".join(f"{k}={v}" for k, v in owner.labels.items())
    return [
        {**live, "kind": kind}
        for kind in owner.kinds
        for live in kube.list_metadata(KUEUE_API_VERSION, kind, labels=labels)
    ]


def _drain(
    kube: Kube, pool: TenantPool, admitted: Sequence[str], nominal: Nominal, room: int
) -> int:
    """Evict the replicas that hold the pool's own GPUs beyond a quota its window
    lowered, as far as the cohort has room for their replacements
    (shoal.render.quota_drain); returns how many went. A refusal or failure of one
    eviction is reported, not raised: the rest of the pool's pass goes on."""
    name = pool.metadata.name
    selector = f"{MANAGED_BY_LABEL}={MANAGED_BY},{POOL_LABEL}={name}"
    pods: list[dict[str, Any]] = []
    workloads: list[dict[str, Any]] = []
    for namespace in admitted:
        pods += kube.list("v1", "Pod", namespace, labels=selector)
        workloads += kube.list(KUEUE_API_VERSION, "Workload", namespace)
    chosen = pods_to_drain(name, pods, admitted_flavors(workloads), nominal.gpus, room)
    evicted, failed = [], []
    for pod in chosen:
        try:
            if kube.evict(pod):
                evicted.append(pod)
        except ApiError as exc:
            failed.append(f"{pod['metadata']['name']}: {exc.status} {exc.reason}")
    body = {
        "apiVersion": API_VERSION,
        "kind": "TenantPool",
        "metadata": {"name": name, "uid": pool.metadata.uid},
    }
    where = f"window {nominal.window!r}" if nominal.window else "its capacity"
    if evicted:
        names = ", ".join(f"{p['metadata']['namespace']}/{p['metadata']['name']}" for p in evicted)
        kube.event(
            body,
            "Normal",
            "DrainingAboveQuota",
            f"Evicted {len(evicted)} replica(s) holding GPUs beyond the {nominal.gpus} of "
            f"{where}: {names}.",
        )
    if failed:
        log.warning("draining pool %s: evictions failed: %s", name, "; ".join(failed))
        kube.event(
            body, "Warning", "DrainFailed", f"Evicting replicas failed: {'; '.join(failed)}."
        )
    return len(evicted)


def converge_capacity(
    kube: Kube,
    pool: TenantPool,
    pools: Sequence[TenantPool],
    admitted: Sequence[str],
    now: dt.datetime,
    *,
    served: bool,
    desired: Sequence[dict[str, Any]],
) -> CapacityOutcome:
    """Apply the pool's planned Kueue objects (``desired``, shoal.render.pool_plan), or
    remove them, and drain what a lowered window left above the quota. ``served``:
    whether the cluster serves Kueue's API."""
    capacity = pool.spec.capacity
    cohort = cohort_of(pool, pools)
    if served:
        owner = capacity_owner(pool.metadata.name)
        apply_and_prune(kube, owner, desired, _held(kube, owner))
    if capacity is None:
        return CapacityOutcome(
            {"mode": "HardQuota"},
            Cond(
                "ElasticCapacity",
                "False",
                "NotConfigured",
                "The pool sets no spec.capacity: its per-namespace quotas alone apply.",
            ),
        )
    if not served:
        # No window applies either: the per-namespace quotas do not change by time.
        return CapacityOutcome(
            {"mode": "HardQuota", "nominalGpus": capacity.gpus},
            Cond(
                "ElasticCapacity",
                "False",
                "KueueNotInstalled",
                f"spec.capacity needs Kueue ({KUEUE_API_VERSION}), which the cluster does "
                "not serve: the pool's per-namespace quotas alone apply until it is installed.",
            ),
        )
    nominal = nominal_at(capacity, now)
    queues = kube.list(KUEUE_API_VERSION, "ClusterQueue", labels=f"{MANAGED_BY_LABEL}={MANAGED_BY}")
    figures = capacity_figures(pool.metadata.name, queues)
    excess = own_flavor_excess(pool.metadata.name, nominal.gpus, queues)
    evicted = 0
    if excess and capacity.cohort is not None:
        lenders = {
            p.metadata.name: (p, nominal_at(p.spec.capacity, now))
            for p in cohort
            if p.spec.capacity is not None
        }
        room = room_to_borrow(pool, lenders, queues)
        if room:
            evicted = _drain(kube, pool, admitted, nominal, room)
    status = {
        "mode": "Kueue",
        "nominalGpus": nominal.gpus,
        "window": nominal.window,
        **figures,
        "drainingGpus": excess,
    }
    own = next((q for q in queues if q["metadata"]["name"] == queue_name(pool.metadata.name)), None)
    active = next(
        (
            c
            for c in ((own or {}).get("status") or {}).get("conditions") or []
            if c.get("type") == "Active"
        ),
        None,
    )
    if active is not None and active.get("status") == "False":
        inactive = Cond(
            "ElasticCapacity",
            "False",
            str(active.get("reason") or "ClusterQueueInactive"),
            f"ClusterQueue {queue_name(pool.metadata.name)}: {active.get('message', '')}",
        )
        return CapacityOutcome(status, inactive, evicted)
    where = f"in cohort {capacity.cohort!r}" if capacity.cohort else "in no cohort"
    during = f" (window {nominal.window!r})" if nominal.window else ""
    elastic = Cond(
        "ElasticCapacity",
        "True" if active is not None else "Unknown",
        "Active" if active is not None else "Pending",
        f"{nominal.gpus} nominal GPU(s){during} {where}, governed by Kueue ClusterQueue "
        f"{queue_name(pool.metadata.name)}.",
    )
    return CapacityOutcome(status, elastic, evicted)
