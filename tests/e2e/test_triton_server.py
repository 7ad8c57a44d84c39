"""The real tritonserver (from the nvidia-pytriton wheel) runs our model repositories."""

from __future__ import annotations

import shutil
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from e2e import triton

MODEL_SOURCE = Path(__file__).resolve().parents[2] / "e2e" / "models" / "linear_cost.py"

BATCHING_CONFIG = """
name: "linear"
backend: "python"
max_batch_size: 16
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]
dynamic_batching {
  preferred_batch_size: [ 8, 16 ]
  max_queue_delay_microseconds: 5000
}
instance_group [ { kind: KIND_CPU count: 1 } ]
parameters { key: "base_ms" value: { string_value: "5" } }
parameters { key: "per_item_ms" value: { string_value: "0.1" } }
"""


def model_repository(root: Path, config: str, name: str = "linear") -> Path:
    version = root / name / "1"
    version.mkdir(parents=True)
    shutil.copy(MODEL_SOURCE, version / "model.py")
    (root / name / "config.pbtxt").write_text(config)
    return root


def test_dynamic_batching_merges_concurrent_requests(tmp_path: Path) -> None:
    repo = model_repository(tmp_path / "repo", BATCHING_CONFIG)
    with triton.running(repo, tmp_path / "work") as server:
        body = {
            "inputs": [
                {"name": "INPUT0", "shape": [1, 4], "datatype": "FP32", "data": [0, 1, 2, 3]}
            ]
        }

        def client_loop(_: int) -> None:
            # One connection per client thread, 20 sequential requests each.
            with httpx.Client(base_url=server.http_url, timeout=30) as http:
                for _ in range(20):
                    reply = http.post("/v2/models/linear/infer", json=body)
                    reply.raise_for_status()
                    assert reply.json()["outputs"][0]["data"] == [0.0, 1.0, 2.0, 3.0]

        with ThreadPoolExecutor(16) as pool:
            list(pool.map(client_loop, range(16)))
        text = server.metrics()
    requests = triton.model_metric(text, "nv_inference_request_success", "linear")
    executions = triton.model_metric(text, "nv_inference_exec_count", "linear")
    assert requests == 320
    # 16 clients against a 5 ms kernel: the scheduler must gather several per execution.
    assert executions < requests / 2, f"{executions} executions for {requests} requests"


def test_a_bad_config_fails_start_with_tritons_reason(tmp_path: Path) -> None:
    broken = BATCHING_CONFIG.replace("max_batch_size: 16", "max_batch_size: 16\nnot_a_field: 1")
    repo = model_repository(tmp_path / "repo", broken)
    with pytest.raises(
        triton.TritonError, match=r"failed to read text proto from \S*linear/config.pbtxt"
    ):
        triton.start(repo, tmp_path / "work", timeout=30)


def test_stop_is_fast_and_leaves_no_process(tmp_path: Path) -> None:
    repo = model_repository(tmp_path / "repo", BATCHING_CONFIG)
    server = triton.start(repo, tmp_path / "work")
    started = time.monotonic()
    server.stop()
    assert server.process.poll() is not None
    assert time.monotonic() - started < 10
