"""Names and labels of the objects Shoal creates, derived only from their owner."""

from __future__ import annotations

from shoal.api.constants import (
    API_VERSION,
    MANAGED_BY,
    MANAGED_BY_LABEL,
    MODEL_LABEL,
    MODEL_SOURCE_LABEL,
    POOL_LABEL,
)
from shoal.api.inferencemodel import InferenceModel

__all__ = ["MANAGED_BY", "MODEL_LABEL", "MODEL_SOURCE_LABEL", "POOL_LABEL"]
HTTP_PORT, GRPC_PORT, METRICS_PORT = 8000, 8001, 8002
# The containers of a model's pod: Triton, and the init container that copies the
# model's files in before it starts.
SERVING_CONTAINER, FETCH_CONTAINER = "triton", "fetch-model"


def config_map_name(model: InferenceModel) -> str:
    return model_config_name(model.metadata.name)


def model_config_name(model_name: str) -> str:
    """The ConfigMap holding config.pbtxt of the stack named ``model_name``."""
    return f"{model_name}-model-config"


def pool_priority_class(pool_name: str) -> str:
    return f"shoal-pool-{pool_name}"


def selector_labels(model: InferenceModel) -> dict[str, str]:
    """The immutable Deployment selector: one model's pods, nothing else."""
    return {MODEL_LABEL: model.metadata.name}


def model_labels(model: InferenceModel) -> dict[str, str]:
    return {
        "app.kubernetes.io/name": "triton",
        "app.kubernetes.io/instance": model.metadata.name,
        "app.kubernetes.io/component": "inference-server",
        MANAGED_BY_LABEL: MANAGED_BY,
        MODEL_LABEL: model.metadata.name,
        POOL_LABEL: model.spec.pool,
    }


def owner_references(kind: str, name: str, uid: str | None) -> list[dict[str, object]]:
    """The controller reference to the owner; none when the owner has no uid yet (as in
    ``shoal render``, which previews objects for resources not yet created)."""
    if not uid:
        return []
    return [
        {
            "apiVersion": API_VERSION,
            "kind": kind,
            "name": name,
            "uid": uid,
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]


def model_metadata(model: InferenceModel, name: str) -> dict[str, object]:
    """Metadata of an object of the model's stack, in the model's namespace."""
    meta: dict[str, object] = {
        "name": name,
        "namespace": model.metadata.namespace,
        "labels": model_labels(model),
    }
    owners = owner_references("InferenceModel", model.metadata.name, model.metadata.uid)
    if owners:
        meta["ownerReferences"] = owners
    return meta
