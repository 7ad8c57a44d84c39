"""The InferenceModel the tests and benchmarks serve with e2e/models/linear_cost.py: one
FP32[4] input echoed to one output, with a kernel that costs a fixed time plus a time
per item (the shape of a GPU kernel), set through the model's parameters."""

from __future__ import annotations

from typing import Any

# One request body for it, in the KServe v2 JSON protocol.
BODY: dict[str, Any] = {
    "inputs": [{"name": "INPUT0", "shape": [1, 4], "datatype": "FP32", "data": [0, 1, 2, 3]}]
}


def linear_model_source(base_ms: float, per_item_ms: float) -> dict[str, Any]:
    """``spec.model`` of the linear-cost model."""
    return {
        "name": "linear",
        "backend": "python",
        "storageUri": "s3://models/linear",
        "inputs": [{"name": "INPUT0", "dataType": "FP32", "dims": [4]}],
        "outputs": [{"name": "OUTPUT0", "dataType": "FP32", "dims": [4]}],
        "parameters": {"base_ms": f"{base_ms:g}", "per_item_ms": f"{per_item_ms:g}"},
    }


def linear_model(
    base_ms: float,
    per_item_ms: float,
    *,
    pool: str = "p",
    namespace: str = "ns",
    gpus: int = 0,
    scaling: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A whole InferenceModel document (gpus 0: CPU instances, as on these machines)."""
    spec: dict[str, Any] = {
        "pool": pool,
        "model": linear_model_source(base_ms, per_item_ms),
        "runtime": {"gpus": gpus},
    }
    if scaling:
        spec["scaling"] = scaling
    return {
        "apiVersion": "shoal.dev/v1alpha1",
        "kind": "InferenceModel",
        "metadata": {"name": "linear", "namespace": namespace},
        "spec": spec,
    }
