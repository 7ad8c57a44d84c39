"""A model that declares no tensors loads and serves in the real tritonserver (2.51, the
server of the 24.10 images) run with the flags the operator renders for it: Triton reads
the tensors from the model's files (auto-complete) and keeps the rendered batching.

The model is the example ads-ctr (backend python, no tensors), on CPUs (runtime.gpus 0,
the only change: these machines have no GPU), served by the rig's linear-cost model
(e2e/models/linear_cost.py), whose ``auto_complete_config`` declares INPUT0 and OUTPUT0,
as a Python model's own would. ONNX Runtime, TensorRT, OpenVINO and TensorFlow
SavedModels are completed by their backends from the model file in the same way
(docs/backends.md), but the wheel's server has the Python backend only.

The second test is the defect this guards against: under --disable-auto-complete-config
(as --strict-model-config=true, which the operator once rendered for every model), the
same model loads without tensors and refuses every request.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import httpx
from e2e.linear_model import BODY
from google.protobuf import text_format
from tritonclient.grpc import model_config_pb2 as pb

from e2e import triton
from shoal.api.batchpolicy import BatchPolicy
from shoal.api.inferencemodel import InferenceModel
from shoal.api.tenantpool import TenantPool
from shoal.render.desired import model_objects
from tests.support.resources import example

MODEL_PY = Path(triton.__file__).resolve().parent / "models" / "linear_cost.py"
STRICT = "--disable-auto-complete-config"


def rendered_ads_ctr(tmp_path: Path) -> tuple[Path, pb.ModelConfig, list[str]]:
    """The example's model repository as its pod holds it, its config, and the server
    flags of its rendered Deployment."""
    doc = example("InferenceModel", "ads-ctr")
    doc["spec"]["runtime"] = {"gpus": 0}
    model = InferenceModel.model_validate(doc)
    assert not model.spec.model.inputs
    assert not model.spec.model.outputs
    policy = BatchPolicy.model_validate(example("BatchPolicy", "offline")).spec
    pool = TenantPool.model_validate(example("TenantPool", model.spec.pool))
    objects = model_objects(model, policy, pool)
    text = next(o for o in objects if o["kind"] == "ConfigMap")["data"]["config.pbtxt"]
    config = text_format.Parse(text, pb.ModelConfig())
    version = tmp_path / "repo" / config.name / "1"
    version.mkdir(parents=True)
    (version.parent / "config.pbtxt").write_text(text)
    shutil.copy(MODEL_PY, version / "model.py")
    deployment = next(o for o in objects if o["kind"] == "Deployment")
    return version.parent.parent, config, triton.rendered_server_args(deployment)


def loaded_config(server: triton.TritonServer, name: str) -> dict[str, Any]:
    config: dict[str, Any] = httpx.get(
        f"{server.http_url}/v2/models/{name}/config", timeout=10
    ).json()
    return config


def test_a_model_without_tensors_gets_them_from_its_files(tmp_path: Path) -> None:
    repo, rendered, args = rendered_ads_ctr(tmp_path)
    assert STRICT not in args
    with triton.running(repo, tmp_path / "work", extra_args=args, strict=False) as server:
        loaded = loaded_config(server, rendered.name)
        assert [(t["name"], t["data_type"], t["dims"]) for t in loaded["input"]] == [
            ("INPUT0", "TYPE_FP32", [4])
        ]
        assert [(t["name"], t["data_type"], t["dims"]) for t in loaded["output"]] == [
            ("OUTPUT0", "TYPE_FP32", [4])
        ]
        # Auto-complete fills batching only where a config has none: the rendered
        # BatchPolicy's stays, so Triton batches as the gateway and autoscaler expect.
        assert loaded["max_batch_size"] == rendered.max_batch_size > 0
        batching = loaded["dynamic_batching"]
        assert int(batching["max_queue_delay_microseconds"]) == (
            rendered.dynamic_batching.max_queue_delay_microseconds
        )
        assert batching["preferred_batch_size"] == list(
            rendered.dynamic_batching.preferred_batch_size
        )

        answer = httpx.post(
            f"{server.http_url}/v2/models/{rendered.name}/infer", json=BODY, timeout=10
        )
        assert answer.status_code == 200, answer.text
        (output,) = answer.json()["outputs"]
        assert (output["name"], output["data"]) == ("OUTPUT0", BODY["inputs"][0]["data"])


def test_under_a_strict_config_the_same_model_serves_nothing(tmp_path: Path) -> None:
    repo, rendered, args = rendered_ads_ctr(tmp_path)
    with triton.running(repo, tmp_path / "work", extra_args=[*args, STRICT]) as server:
        loaded = loaded_config(server, rendered.name)
        assert not loaded.get("input")
        assert not loaded.get("output")
        answer = httpx.post(
            f"{server.http_url}/v2/models/{rendered.name}/infer", json=BODY, timeout=10
        )
        assert answer.status_code == 400, answer.text
        assert "INPUT0" in answer.json()["error"], answer.text
