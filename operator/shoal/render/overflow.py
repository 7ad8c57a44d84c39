"""A model's overflow replicas (pure): the same model, a few replicas in another pool,
for the requests its own replicas have no slot for (``spec.overflow``).

The overflow stack is the model's own stack rendered for a twin of the model: named
``<model>-overflow``, in the overflow pool (its placement, PriorityClass, Kueue queue
and so its quota, and its NetworkPolicies, which select pods by the pool label), scaled
between the overflow's bounds on its own queue depth (the spilled load), reactively
only. Every object is owned by the real model, so it goes with it. One NetworkPolicy
more lets the gateway of the model's own pool reach the twin's pods: that gateway is
the one that spills to them.
"""

from __future__ import annotations

from typing import Any

from shoal.api.batchpolicy import BatchPolicySpec
from shoal.api.constants import GATEWAY_LABEL, OVERFLOW_OF_LABEL, POOL_LABEL, ROUTED_BY_LABEL
from shoal.api.inferencemodel import InferenceModel, Overflow
from shoal.api.tenantpool import TenantPool
from shoal.render.desired import batched_model_objects
from shoal.render.images import DEFAULT_IMAGES, ServingImages
from shoal.render.names import (
    GRPC_PORT,
    HTTP_PORT,
    model_labels,
    model_metadata,
    owner_references,
    selector_labels,
)
from shoal.render.tenancy import namespace_peer

SUFFIX = "-overflow"


def overflow_name(model_name: str) -> str:
    """The name of the overflow Deployment, Service, autoscaler and policy."""
    return f"{model_name}{SUFFIX}"


def overflow_twin(model: InferenceModel, overflow: Overflow) -> InferenceModel:
    """The model as its overflow replicas run it: same Triton model, runtime and
    batching; another name and pool; the overflow's bounds, no schedules, no forecast."""
    scaling = model.spec.scaling.model_copy(
        update={
            "min_replicas": overflow.min_replicas,
            "max_replicas": overflow.max_replicas,
            "predictive": None,
            "schedules": [],
        }
    )
    spec = model.spec.model_copy(
        update={"pool": overflow.pool, "scaling": scaling, "overflow": None}
    )
    meta = model.metadata.model_copy(update={"name": overflow_name(model.metadata.name)})
    return model.model_copy(update={"metadata": meta, "spec": spec})


def gateway_ingress(
    model: InferenceModel, twin: InferenceModel, gateway_namespace: str
) -> dict[str, Any]:
    """The gateway of the model's own pool may call the twin's pods (the overflow
    pool's policies admit only that pool's gateway). It carries no pool label: it is
    the model's, and a pool removes the policies with its label that it did not make."""
    meta = model_metadata(twin, twin.metadata.name)
    meta["labels"] = {k: v for k, v in model_labels(twin).items() if k != POOL_LABEL}
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": meta,
        "spec": {
            "podSelector": {"matchLabels": selector_labels(twin)},
            "policyTypes": ["Ingress"],
            "ingress": [
                {
                    "from": [
                        {
                            **namespace_peer([gateway_namespace]),
                            "podSelector": {"matchLabels": {GATEWAY_LABEL: model.spec.pool}},
                        }
                    ],
                    "ports": [
                        {"protocol": "TCP", "port": HTTP_PORT},
                        {"protocol": "TCP", "port": GRPC_PORT},
                    ],
                }
            ],
        },
    }


def overflow_objects(
    model: InferenceModel,
    batching: BatchPolicySpec,
    pool: TenantPool,
    gateway_namespace: str,
    images: ServingImages = DEFAULT_IMAGES,
    queue: str | None = None,
) -> list[dict[str, Any]]:
    """The overflow stack of ``model`` in ``pool`` (its ``spec.overflow.pool``), in
    apply order; ``queue``: that pool's Kueue LocalQueue where its capacity is elastic.
    Raises ValueError as ``batched_model_objects`` does."""
    overflow = model.spec.overflow
    assert overflow is not None, "a model without spec.overflow has no overflow stack"
    twin = overflow_twin(model, overflow)
    objects = [
        gateway_ingress(model, twin, gateway_namespace),
        *batched_model_objects(twin, batching, pool, None, images, queue),
    ]
    owners = owner_references("InferenceModel", model.metadata.name, model.metadata.uid)
    for obj in objects:
        if owners:
            obj["metadata"]["ownerReferences"] = owners
        obj["metadata"]["labels"][OVERFLOW_OF_LABEL] = model.metadata.name
        if obj["kind"] == "Service":
            obj["metadata"]["labels"][ROUTED_BY_LABEL] = model.spec.pool
    return objects
