"""The config.pbtxt rendered for a backend vllm model loads into the real tritonserver
(2.51, the server of the 24.10 images) run with the rendered flags, and answers on the
generate endpoints as a vLLM model does.

vLLM itself needs a GPU: a stand-in Python-based backend named ``vllm``
(e2e/models/vllm_standin.py) keeps what the real backend demands of the config when it
loads (text_output's config, decoupled, model.json beside the config, no KIND_GPU for
more than one GPU) and echoes the prompt instead of generating. Unlike for_cpu's
stand-ins, nothing of the rendered config is changed: KIND_MODEL needs no GPU.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import httpx

from e2e import triton
from shoal.api.inferencemodel import InferenceModel
from shoal.api.tenantpool import TenantPool
from shoal.render.desired import model_objects
from tests.support.resources import example

STANDIN = Path(triton.__file__).resolve().parent / "models" / "vllm_standin.py"


def vllm_model() -> InferenceModel:
    doc = example("InferenceModel", "ads-ctr")
    del doc["spec"]["batchPolicy"]
    doc["spec"]["model"] = {
        "name": "llama",
        "backend": "vllm",
        "storageUri": "s3://models/llama",
        "parameters": {"REPORT_CUSTOM_METRICS": "yes"},
    }
    doc["spec"]["runtime"] = {"gpus": 2}
    return InferenceModel.model_validate(doc)


def rendered(kind: str, objects: list[dict[str, Any]]) -> dict[str, Any]:
    return next(o for o in objects if o["kind"] == kind)


def test_a_vllm_model_loads_and_streams_as_rendered(tmp_path: Path) -> None:
    model = vllm_model()
    pool = TenantPool.model_validate(example("TenantPool", model.spec.pool))
    objects = model_objects(model, None, pool)
    config = rendered("ConfigMap", objects)["data"]["config.pbtxt"]

    repo = tmp_path / "models"
    (repo / "llama" / "1").mkdir(parents=True)
    (repo / "llama" / "config.pbtxt").write_text(config)
    # What the model's storage holds: the engine's arguments, for two GPUs.
    engine = {"model": "/models/llama/1/weights", "tensor_parallel_size": 2}
    (repo / "llama" / "1" / "model.json").write_text(json.dumps(engine))
    work = tmp_path / "work"
    (work / "backends" / "vllm").mkdir(parents=True)
    shutil.copy(STANDIN, work / "backends" / "vllm" / "model.py")
    # A Python-based backend runs on the Python backend's library, which Triton then
    # wants to find inside the backends' directory: a copy, not a link to the wheel's.
    python = work / "backends" / "python"
    python.mkdir()
    shutil.copy(triton.TritonInstall.find().root / "backends/python/libtriton_python.so", python)

    args = triton.rendered_server_args(rendered("Deployment", objects))
    # Its config is whole as rendered: no backend may complete it.
    assert "--disable-auto-complete-config" in args
    with triton.running(repo, work, extra_args=args, timeout=120, strict=False) as server:
        url = f"{server.http_url}/v2/models/llama"
        loaded = httpx.get(f"{url}/config", timeout=10).json()
        assert loaded["backend"] == "vllm"
        assert loaded["max_batch_size"] == 0
        assert loaded["model_transaction_policy"] == {"decoupled": True}
        assert [(g["kind"], g["count"]) for g in loaded["instance_group"]] == [("KIND_MODEL", 1)]
        assert "dynamic_batching" not in loaded

        prompt = "what does gather at the edge mean"
        whole = httpx.post(
            f"{url}/generate", json={"text_input": prompt, "stream": False}, timeout=10
        )
        assert whole.status_code == 200, whole.text
        assert whole.json()["text_output"] == f"[MODEL] {prompt}"

        options = {"max_tokens": 3}
        streamed = httpx.post(
            f"{url}/generate_stream",
            json={
                "text_input": prompt,
                "stream": True,
                "exclude_input_in_output": True,
                "sampling_parameters": json.dumps(options),
            },
            timeout=10,
        )
        assert streamed.status_code == 200, streamed.text
        events = [
            json.loads(line.removeprefix("data: "))
            for line in streamed.text.splitlines()
            if line.startswith("data: ")
        ]
        assert [e["text_output"] for e in events] == ["what", "does", "gather"]

        # A decoupled model is not served on the plain infer endpoint over HTTP: clients
        # use generate, generate_stream or gRPC streaming (docs/backends.md).
        infer = httpx.post(
            f"{url}/infer",
            json={
                "inputs": [
                    {"name": "text_input", "shape": [1], "datatype": "BYTES", "data": [prompt]}
                ]
            },
            timeout=10,
        )
        assert infer.status_code >= 400, infer.text
        assert "doesn't support models with decoupled transaction policy" in infer.text
