"""What should exist for one InferenceModel, and why, decided once (pure).

The reconciler gathers what only the cluster knows into ``ModelFacts`` (the time, whether
Kueue is served, the forecast's warm pool, the pool's other served models); ``shoal
render`` takes the same facts from its flags or their defaults. Both call
``plan_model``, so the preview a GitOps user diffs is what the operator applies: the
schedule floor, the Kueue queue, the elastic GPU ceiling and the forecast included.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from shoal.api.batchpolicy import BatchPolicySpec
from shoal.api.inferencemodel import InferenceModel
from shoal.api.quantity import quantity_value
from shoal.api.tenantpool import TenantPool
from shoal.render.autoscaler import ReplicaBounds, replica_bounds
from shoal.render.batching import effective_batching
from shoal.render.desired import batched_model_objects
from shoal.render.elastic import (
    Holding,
    gpu_ceiling,
    model_gpu_ceilings,
    model_queue,
    next_capacity_change,
    parked,
    replica_gpus,
    warm_pool_gpus,
)
from shoal.render.images import DEFAULT_IMAGES, ServingImages
from shoal.render.schedule import Floor, floor_at, next_change, raised

Key = tuple[str, str]  # (namespace, name)


@dataclass(frozen=True)
class PoolMember:
    """Another model of the same pool that is served (it has a Deployment): its stored
    spec and how many of its replicas are available."""

    key: Key
    spec: Mapping[str, Any]
    available: int


@dataclass(frozen=True)
class ModelFacts:
    """What only the cluster knows about a model's surroundings, for one plan."""

    now: dt.datetime
    # The cluster serves Kueue (asked only for a pool with elastic capacity).
    kueue_served: bool = False
    # The predictive loop's warm pool for the model, if it has learned one.
    forecast_warm_pool: int | None = None
    # The pool's served models (this one among them once served), for an elastic
    # pool's GPU shares.
    pool_members: tuple[PoolMember, ...] = ()
    images: ServingImages = field(default=DEFAULT_IMAGES)


class PlanError(ValueError):
    """The spec cannot be planned as it stands; ``reason`` is the condition's."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


@dataclass(frozen=True)
class ModelPlan:
    """Every child the model should have, in apply order, and the decisions behind it."""

    objects: tuple[dict[str, Any], ...]
    batching: BatchPolicySpec
    floor: Floor
    bounds: ReplicaBounds
    # The pool's Kueue LocalQueue its pods name (an elastic pool, Kueue served).
    queue: str | None
    # The GPUs the pool can admit the model to now (an elastic pool without a cohort).
    gpu_ceiling: int | None
    # The pool has fewer GPUs now than one replica needs: the model runs none.
    parked: bool
    # When a scheduled window, or the pool's capacity window, next opens or closes.
    next_change: dt.datetime | None


def _holdings(
    model: InferenceModel, pool_gpus: int, members: tuple[PoolMember, ...]
) -> list[Holding]:
    """Each served model of the pool in GPUs: its warm pool and what its available
    replicas hold; this one with its warm pool and nothing held until it is served. A
    model parked by the pool's GPUs holds nothing."""
    me = (model.metadata.namespace or "", model.metadata.name)
    found = {me: Holding(me, model.spec.scaling.min_replicas * model.spec.runtime.gpus, 0)}
    for member in members:  # this model among them once it is served
        if parked(pool_gpus, replica_gpus(member.spec)):
            found[member.key] = Holding(member.key, 0, 0)
        else:
            held = member.available * replica_gpus(member.spec)
            found[member.key] = Holding(member.key, warm_pool_gpus(member.spec), held)
    return list(found.values())


def plan_model(
    model: InferenceModel,
    pool: TenantPool,
    policy: BatchPolicySpec | None,
    facts: ModelFacts,
) -> ModelPlan:
    """The model's plan; raises PlanError when its schedules or batching do not fit."""
    now = facts.now
    scaling = model.spec.scaling
    runtime = model.spec.runtime
    # A CRD rule cannot see cpu (a quantity that also takes numbers has no CEL type), so
    # the relation the Pod API requires of a container's resources is checked here.
    if runtime.cpu_limit is not None and quantity_value(runtime.cpu_limit) < quantity_value(
        runtime.cpu
    ):
        raise PlanError(
            "InvalidResources",
            f"spec.runtime.cpuLimit: must be at least spec.runtime.cpu ({runtime.cpu}), "
            f"not {runtime.cpu_limit}",
        )
    try:
        floor = floor_at(scaling, now)
        predictive = scaling.predictive
        if predictive is not None and predictive.enabled and predictive.warm_pool:
            floor = raised(floor, facts.forecast_warm_pool)
        upcoming = next_change(scaling, now)
    except (ValueError, KeyError, LookupError) as exc:
        raise PlanError(
            "InvalidSchedule", f"A scaling schedule cannot be evaluated: {exc}"
        ) from None
    try:
        batching = effective_batching(model, policy)
        queue = model_queue(pool, lambda: facts.kueue_served)
        ceiling = gpu_ceiling(pool, now) if queue is not None else None
        idle = False
        if ceiling is not None:
            idle = parked(ceiling, model.spec.runtime.gpus)
            # The pool's other models keep their warm pools; its capacity windows move it.
            me = (model.metadata.namespace or "", model.metadata.name)
            ceiling = model_gpu_ceilings(ceiling, _holdings(model, ceiling, facts.pool_members))[me]
            moments = (upcoming, next_capacity_change(pool.spec.capacity, now))
            upcoming = min((m for m in moments if m is not None), default=None)
        objects = batched_model_objects(
            model, batching, pool, floor.min_replicas, facts.images, queue, ceiling, idle
        )
    except ValueError as exc:
        raise PlanError(
            "InvalidBatching", f"The model's batchPolicy overrides do not fit: {exc}"
        ) from None
    return ModelPlan(
        objects=tuple(objects),
        batching=batching,
        floor=floor,
        bounds=replica_bounds(model, pool.spec, floor.min_replicas, ceiling),
        queue=queue,
        gpu_ceiling=ceiling,
        parked=idle,
        next_change=upcoming,
    )
