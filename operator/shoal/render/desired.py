"""Everything the operator wants to exist for a model or a pool, in apply order."""

from __future__ import annotations

from typing import Any

from shoal.api.batchpolicy import BatchPolicySpec
from shoal.api.inferencemodel import InferenceModel
from shoal.api.tenantpool import TenantPool
from shoal.render.autoscaler import horizontal_autoscaler
from shoal.render.batching import effective_batching
from shoal.render.images import DEFAULT_IMAGES, ServingImages
from shoal.render.pool import priority_class
from shoal.render.workload import serving_stack


def model_objects(
    model: InferenceModel,
    policy: BatchPolicySpec | None,
    pool: TenantPool,
    min_replicas: int | None = None,
    images: ServingImages = DEFAULT_IMAGES,
    queue: str | None = None,
) -> list[dict[str, Any]]:
    """The model's serving stack and autoscaler. ``queue``: its pool's Kueue LocalQueue
    where the pool's capacity is elastic.

    Raises ValueError when the model's overrides do not fit its BatchPolicy.
    """
    return batched_model_objects(
        model, effective_batching(model, policy), pool, min_replicas, images, queue
    )


def batched_model_objects(
    model: InferenceModel,
    batching: BatchPolicySpec,
    pool: TenantPool,
    min_replicas: int | None = None,
    images: ServingImages = DEFAULT_IMAGES,
    queue: str | None = None,
    gpu_ceiling: int | None = None,
    parked: bool = False,
) -> list[dict[str, Any]]:
    """``model_objects`` for a model whose effective batching is already known.
    ``gpu_ceiling``: the GPUs its pool can admit it to now; ``parked``: the pool has
    fewer GPUs now than one replica needs, so the model runs none (shoal.render.elastic)."""
    return [
        *serving_stack(model, batching, pool.spec, images, queue, parked),
        horizontal_autoscaler(model, batching, pool.spec, min_replicas, gpu_ceiling),
    ]


def pool_objects(pool: TenantPool) -> list[dict[str, Any]]:
    return [priority_class(pool)]
