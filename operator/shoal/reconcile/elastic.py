"""A pool's elastic capacity on the cluster: whether Kueue serves it, its Kueue objects
applied (and removed when the capacity is unset or a namespace released), and what the
ClusterQueues say about GPUs borrowed and lent."""

from __future__ import annotations

import datetime as dt
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from shoal.api.common import parse_object
from shoal.api.constants import (
    KUEUE_API_VERSION,
    KUEUE_GROUP,
    KUEUE_VERSION,
    MANAGED_BY,
    MANAGED_BY_LABEL,
    POOL_LABEL,
)
from shoal.api.tenantpool import TenantPool
from shoal.kube.client import ApiError, Kube
from shoal.reconcile.conditions import Cond
from shoal.render.elastic import capacity_figures, elastic_objects, nominal_at, queue_name

KUEUE_KINDS = ("LocalQueue", "ClusterQueue", "ResourceFlavor")  # deletion order
# How long an answer to "does the cluster serve Kueue?" is trusted, and how often a pool
# with elastic capacity looks again (Kueue's objects are not watched; Kueue may come).
PROBE_SECONDS = 10.0
RECHECK_SECONDS = 30.0


@dataclass
class KueueProbe:
    """Whether the API server serves Kueue's API, asked at most every ``ttl`` seconds
    (a model's pass asks too, and there may be thousands)."""

    ttl: float = PROBE_SECONDS
    clock: Callable[[], float] = time.monotonic
    _answer: tuple[bool, float] | None = field(default=None, init=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False)

    def served(self, kube: Kube) -> bool:
        with self._lock:
            if self._answer is not None and self.clock() - self._answer[1] < self.ttl:
                return self._answer[0]
        try:
            document = kube.get_path(f"/apis/{KUEUE_GROUP}/{KUEUE_VERSION}")
            served = any(r.get("kind") == "ClusterQueue" for r in document.get("resources", []))
        except ApiError as exc:
            if exc.status not in (403, 404, 503):
                raise
            served = False
        with self._lock:
            self._answer = (served, self.clock())
        return served


def model_queue(pool: TenantPool, kueue_served: Callable[[], bool]) -> str | None:
    """The LocalQueue a model's pods name: its pool's, where the pool's capacity is
    elastic and Kueue serves it. Kueue is asked about only for such a pool, so models of
    other pools never wait on (or fail with) the discovery request."""
    if pool.spec.capacity is None or not kueue_served():
        return None
    return queue_name(pool.metadata.name)


def cohort_of(pool: TenantPool, bodies: list[dict[str, Any]]) -> list[TenantPool]:
    """The pools with elastic capacity in ``pool``'s cohort, ``pool`` included (pure)."""
    cohort = pool.spec.capacity.cohort if pool.spec.capacity else None
    if cohort is None:
        return [pool]
    out = []
    for body in bodies:
        if body["metadata"].get("deletionTimestamp"):
            continue
        try:
            other = parse_object(TenantPool, body)
        except ValidationError:
            continue  # reported on that pool
        if other.spec.capacity is not None and other.spec.capacity.cohort == cohort:
            out.append(other)
    return out


def _leftovers(kube: Kube, pool: str, keep: set[tuple[str, str, str]]) -> list[dict[str, Any]]:
    labels = f"{MANAGED_BY_LABEL}={MANAGED_BY},{POOL_LABEL}={pool}"
    out = []
    for kind in KUEUE_KINDS:
        for live in kube.list_metadata(KUEUE_API_VERSION, kind, labels=labels):
            meta = live["metadata"]
            if (kind, meta.get("namespace", ""), meta["name"]) not in keep:
                out.append({"apiVersion": KUEUE_API_VERSION, "kind": kind, "metadata": meta})
    return out


def converge_capacity(
    kube: Kube,
    probe: KueueProbe,
    pool: TenantPool,
    pools: list[dict[str, Any]],
    admitted: list[str],
    now: dt.datetime,
) -> tuple[dict[str, Any], Cond]:
    """Apply the pool's Kueue objects as they are at ``now``, or remove them; returns the
    pool's ``status.capacity`` and its ElasticCapacity condition."""
    capacity = pool.spec.capacity
    served = probe.served(kube)
    desired: list[dict[str, Any]] = []
    if capacity is not None and served:
        nominal = nominal_at(capacity, now)
        desired = elastic_objects(pool, cohort_of(pool, pools), admitted, nominal)
    if served:
        for obj in desired:
            kube.apply(obj)
        keep = {
            (o["kind"], o["metadata"].get("namespace", ""), o["metadata"]["name"]) for o in desired
        }
        for leftover in _leftovers(kube, pool.metadata.name, keep):
            kube.delete(leftover)
    if capacity is None:
        return {"mode": "HardQuota"}, Cond(
            "ElasticCapacity",
            "False",
            "NotConfigured",
            "The pool sets no spec.capacity: its per-namespace quotas alone apply.",
        )
    if not served:
        # No window applies either: the per-namespace quotas do not change by time.
        return {"mode": "HardQuota", "nominalGpus": capacity.gpus}, Cond(
            "ElasticCapacity",
            "False",
            "KueueNotInstalled",
            f"spec.capacity needs Kueue ({KUEUE_API_VERSION}), which the cluster does not "
            "serve: the pool's per-namespace quotas alone apply until it is installed.",
        )
    queues = kube.list(KUEUE_API_VERSION, "ClusterQueue", labels=f"{MANAGED_BY_LABEL}={MANAGED_BY}")
    figures = capacity_figures(pool.metadata.name, queues)
    status = {"mode": "Kueue", "nominalGpus": nominal.gpus, "window": nominal.window, **figures}
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
        return status, Cond(
            "ElasticCapacity",
            "False",
            str(active.get("reason") or "ClusterQueueInactive"),
            f"ClusterQueue {queue_name(pool.metadata.name)}: {active.get('message', '')}",
        )
    where = f"in cohort {capacity.cohort!r}" if capacity.cohort else "in no cohort"
    during = f" (window {nominal.window!r})" if nominal.window else ""
    return status, Cond(
        "ElasticCapacity",
        "True" if active is not None else "Unknown",
        "Active" if active is not None else "Pending",
        f"{nominal.gpus} nominal GPU(s){during} {where}, governed by Kueue ClusterQueue "
        f"{queue_name(pool.metadata.name)}.",
    )
