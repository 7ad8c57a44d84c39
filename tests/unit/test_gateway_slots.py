"""How many requests the gateway lets each model replica hold at once: two batches
(one executing, one being gathered) for every batch the replica executes at once, its
model instances on each of its GPUs. Fewer would keep a multi-instance replica's
instances idle while requests wait at the gateway, and the HPA, which scales on that
wait, would add replicas instead."""

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
def test_a_replica_holds_two_batches_per_instance_it_runs(
    instances: int, gpus: int, batches: int
) -> None:
    model = _model(instances, gpus)
    policy = BatchPolicy.model_validate(example("BatchPolicy", "interactive")).spec
    planned = route(model, policy, ())
    assert planned is not None
    assert executors(model) == batches
    assert planned.server_maxconn == 2 * policy.max_batch_size * batches
    # The count Triton reads: the instance group's, on each GPU for KIND_GPU.
    config = render_config_pbtxt(model, policy)
    assert f"count: {instances}" in config
    assert ("KIND_GPU" in config) == (gpus > 0)


def test_openvino_runs_its_instances_on_the_cpu_whatever_gpus_the_pod_has() -> None:
    # The API refuses openvino with GPUs; the count is what Triton runs on the CPU.
    model = _model(3, 0, platform=None, backend="openvino")
    assert executors(model) == 3
