"""How many requests the gateway lets each model replica hold at once: a batch for
each batch the replica executes at once (its model instances, on each of its GPUs),
and the batches gathered for them to take next: one for each instance, or one in all
for a route with priority lanes, whose order Triton's queue would not keep. Two batches
in all kept a multi-instance replica's instances idle while requests waited at the
gateway, and the HPA, which scales on that wait, added replicas instead."""

from __future__ import annotations

from typing import Any

import pytest

from shoal.api.batchpolicy import BatchPolicy
from shoal.api.inferencemodel import InferenceModel
from shoal.render.gateway_plan import route
from shoal.render.model_config import executors, render_config_pbtxt
from tests.support.resources import example


def _model(instances: int, gpus: int, **model: Any) -> InferenceModel:
    doc = example("InferenceModel", "search-ranker")
    doc["spec"]["model"].update(instances=instances, **model)
    doc["spec"]["runtime"] = {"gpus": gpus}
    return InferenceModel.model_validate(doc)


@pytest.mark.parametrize(
    ("instances", "gpus", "batches"),
    [(1, 0, 1), (4, 0, 4), (1, 1, 1), (2, 1, 2), (2, 4, 8), (3, 2, 6)],
)
@pytest.mark.parametrize("levels", [0, 1, 3])
def test_a_replica_holds_a_batch_per_instance_and_those_gathered_next(
    instances: int, gpus: int, batches: int, levels: int
) -> None:
    model = _model(instances, gpus)
    policy = BatchPolicy.model_validate(example("BatchPolicy", "interactive")).spec
    update: dict[str, Any] = {
        "priority_levels": levels,
        "default_priority": None,
        "priority_queue_policies": [],
    }
    policy = policy.model_copy(update=update)
    planned = route(model, policy, ())
    assert planned is not None
    assert executors(model) == batches
    gathered = 1 if levels > 1 else batches
    assert planned.server_maxconn == (batches + gathered) * policy.max_batch_size
    # The count Triton reads: the instance group's, on each GPU for KIND_GPU.
    config = render_config_pbtxt(model, policy)
    assert f"count: {instances}" in config
    assert ("KIND_GPU" in config) == (gpus > 0)


def test_openvino_runs_its_instances_on_the_cpu_whatever_gpus_the_pod_has() -> None:
    # The API refuses openvino with GPUs; the count is what Triton runs on the CPU.
    model = _model(3, 0, platform=None, backend="openvino")
    assert executors(model) == 3
