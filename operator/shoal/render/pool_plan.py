"""What should exist for a TenantPool, decided in one pure function.

``plan_pool`` takes the validated pool and a frozen record of what only the cluster
knows (its namespaces and their labels, the time, whether Kueue is served, the other
pools of its cohort) and returns the pool's own objects: its PriorityClass, a quota and
network policies in each namespace it admits, and its Kueue objects where its capacity
is elastic; and when it needs its next pass. The operator's pass (shoal.reconcile.pool)
gathers the facts and applies the plan; ``shoal render`` plans with the facts it is
given. The pool's gateway has its own planner (shoal.render.gateway_plan).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from shoal.api.admission import admits
from shoal.api.tenantpool import TenantPool
from shoal.render.desired import pool_objects
from shoal.render.elastic import elastic_objects, next_capacity_change, nominal_at
from shoal.render.schedule import next_window_change
from shoal.render.tenancy import DEFAULT_CLUSTER_CIDRS, tenant_objects


@dataclass(frozen=True)
class PoolFacts:
    """What a pool's plan depends on beyond its spec."""

    now: dt.datetime
    # The cluster's live namespaces the operator watches, by name, with their labels.
    namespaces: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    cluster_cidrs: Sequence[str] = DEFAULT_CLUSTER_CIDRS
    gateway_namespace: str | None = None
    kueue_served: bool = False
    # Every valid pool that is not being deleted (the cohort is found among them).
    pools: Sequence[TenantPool] = ()


@dataclass(frozen=True)
class PoolPlan:
    """Everything the pool's pass writes, and when it looks again."""

    admitted: tuple[str, ...]
    priority_class: dict[str, Any]
    # Per admitted namespace: its quota and network policies.
    isolation: Mapping[str, tuple[dict[str, Any], ...]]
    # The Kueue objects of elastic capacity (empty without capacity or without Kueue).
    capacity: tuple[dict[str, Any], ...]
    next_change: dt.datetime | None

    @property
    def objects(self) -> tuple[dict[str, Any], ...]:
        """Every object, in apply order."""
        isolation = (o for namespace in self.admitted for o in self.isolation[namespace])
        return (self.priority_class, *isolation, *self.capacity)


def live_namespaces(bodies: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, str]]:
    """Of Namespace objects, the live ones (not terminating) by name, with their labels
    (pure): a terminating namespace is admitted by no pool."""
    return {
        body["metadata"]["name"]: dict(body["metadata"].get("labels") or {})
        for body in bodies
        if not body["metadata"].get("deletionTimestamp")
    }


def admitted_namespaces(pool: TenantPool, namespaces: Mapping[str, Mapping[str, str]]) -> list[str]:
    """The namespaces among ``namespaces`` the pool admits, sorted (pure)."""
    return sorted(name for name, labels in namespaces.items() if admits(pool, name, dict(labels)))


def cohort_of(pool: TenantPool, pools: Sequence[TenantPool]) -> list[TenantPool]:
    """The pools with elastic capacity in ``pool``'s cohort, ``pool`` included (pure).
    ``pools``: every valid pool that is not being deleted."""
    cohort = pool.spec.capacity.cohort if pool.spec.capacity else None
    if cohort is None:
        return [pool]
    return [
        other
        for other in pools
        if other.spec.capacity is not None and other.spec.capacity.cohort == cohort
    ]


def next_pool_change(pool: TenantPool, now: dt.datetime) -> dt.datetime | None:
    """When one of the pool's windows next opens or closes: its gateway's limits or its
    nominal GPUs change then, and the pool needs a pass (pure)."""
    moments = [
        next_window_change(pool.spec.gateway.windows, now) if pool.spec.gateway.enabled else None,
        next_capacity_change(pool.spec.capacity, now),
    ]
    return min((m for m in moments if m is not None), default=None)


def plan_pool(pool: TenantPool, facts: PoolFacts) -> PoolPlan:
    """The pool's objects on ``facts`` (pure)."""
    admitted = admitted_namespaces(pool, facts.namespaces)
    isolation = {
        namespace: tuple(
            tenant_objects(pool, namespace, facts.cluster_cidrs, facts.gateway_namespace)
        )
        for namespace in admitted
    }
    capacity: tuple[dict[str, Any], ...] = ()
    if pool.spec.capacity is not None and facts.kueue_served:
        nominal = nominal_at(pool.spec.capacity, facts.now)
        cohort = cohort_of(pool, facts.pools)
        capacity = tuple(elastic_objects(pool, cohort, admitted, nominal))
    (priority_class,) = pool_objects(pool)
    return PoolPlan(
        admitted=tuple(admitted),
        priority_class=priority_class,
        isolation=isolation,
        capacity=capacity,
        next_change=next_pool_change(pool, facts.now),
    )
