"""A model Triton cannot load: the real tritonserver, run with the flags the operator
renders, exits (so the kubelet restarts the container rather than leaving a replica
that never becomes ready), and its last log lines, cut as the kubelet cuts a
``FallbackToLogsOnError`` termination message, carry Triton's own error into the
model's status as FailedToLoad. The kubelet itself cannot run here: the pod status
is written as it would write it, around the real server's real output."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from e2e.triton_repo import add_model, for_cpu

from e2e import triton
from shoal.api.inferencemodel import InferenceModel
from shoal.api.tenantpool import TenantPool
from shoal.reconcile.replica_state import replica_state, summarise
from shoal.render.desired import model_objects
from shoal.render.names import SERVING_CONTAINER
from tests.support.resources import example_documents

FAILING_MODEL_PY = """
class TritonPythonModel:
    def initialize(self, args):
        raise RuntimeError("weights file model.safetensors is truncated")
"""
# What the kubelet keeps of a container's log for FallbackToLogsOnError.
KUBELET_MAX_BYTES, KUBELET_MAX_LINES = 2048, 80


def kubelet_termination_message(log: str) -> str:
    lines = log.splitlines(keepends=True)[-KUBELET_MAX_LINES:]
    return "".join(lines).encode()[-KUBELET_MAX_BYTES:].decode(errors="replace")


def rendered(kind: str, objects: list[dict[str, Any]]) -> dict[str, Any]:
    return next(o for o in objects if o["kind"] == kind)


def test_triton_exits_on_a_model_it_cannot_load_and_status_quotes_it(tmp_path: Path) -> None:
    docs = example_documents()
    doc = next(d for d in docs if d.get("kind") == "InferenceModel")
    model = InferenceModel.model_validate(doc)
    pool_doc = next(
        d
        for d in docs
        if d.get("kind") == "TenantPool" and d["metadata"]["name"] == model.spec.pool
    )

    objects = model_objects(model, None, TenantPool.model_validate(pool_doc))
    config = rendered("ConfigMap", objects)["data"]["config.pbtxt"]
    repo = tmp_path / "models"
    name = add_model(repo, for_cpu(config))
    (repo / name / "1" / "model.py").write_text(FAILING_MODEL_PY)

    server = triton.start(
        repo,
        tmp_path / "work",
        extra_args=triton.rendered_server_args(rendered("Deployment", objects)),
        wait_ready=False,
    )
    try:
        code = server.process.wait(timeout=120)
    finally:
        server.stop()
    assert code != 0, "tritonserver kept running with a model it could not load"

    message = kubelet_termination_message(server.log.read_text(errors="replace"))
    pod = {
        "metadata": {"name": f"{model.metadata.name}-5d9c7-x2x4q"},
        "status": {
            "initContainerStatuses": [
                {"name": "fetch-model", "state": {"terminated": {"exitCode": 0}}}
            ],
            "containerStatuses": [
                {
                    "name": SERVING_CONTAINER,
                    "ready": False,
                    "state": {"waiting": {"reason": "CrashLoopBackOff"}},
                    "lastState": {
                        "terminated": {"exitCode": code, "reason": "Error", "message": message}
                    },
                }
            ],
        },
    }
    state = replica_state(pod)
    assert state.state == "FailedToLoad"
    # Triton's error line, not the start-up table printed before it.
    assert f"load failed for model '{name}'" in state.message, state.message
    assert "strict_readiness" not in state.message, state.message
    assert "weights file model.safetensors is truncated" in state.message, state.message
    assert summarise([pod]).failed
