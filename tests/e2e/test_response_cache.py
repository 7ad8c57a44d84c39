"""The response cache on the real tritonserver, configured as the operator renders it.

The model's config.pbtxt and the server's flags both come from the rendered objects:
the ConfigMap's config (adapted for the CPU, e2e/triton_repo.py) and the
Triton container's args of the rendered Deployment (e2e/triton.py's
rendered_server_args), so ``--cache-config`` is the operator's, not the test's. The
wheel's tritonserver ships the local cache (caches/local/libtritoncache_local.so).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import httpx
import pytest
from e2e.triton_repo import add_model, for_cpu

from e2e import triton
from shoal.api.inferencemodel import InferenceModel
from shoal.api.tenantpool import TenantPool
from shoal.render.desired import model_objects
from tests.support.resources import example
from tests.support.wait import wait_for

REQUESTS = 12
BODY = {"inputs": [{"name": "INPUT0", "shape": [1, 4], "datatype": "FP32", "data": [1, 2, 3, 4]}]}


def rendered(response_cache: bool) -> tuple[str, dict[str, Any]]:
    """(config.pbtxt, Deployment) of a model with or without the response cache."""
    doc = example("InferenceModel", "labs-embedder")
    doc["spec"]["model"]["responseCache"] = response_cache
    doc["spec"]["model"]["inputs"] = [{"name": "INPUT0", "dataType": "FP32", "dims": [4]}]
    doc["spec"]["model"]["outputs"] = [{"name": "OUTPUT0", "dataType": "FP32", "dims": [4]}]
    doc["spec"]["runtime"]["responseCacheSize"] = "16Mi"
    objs = model_objects(InferenceModel.model_validate(doc), None, pool())
    by_kind = {o["kind"]: o for o in objs}
    return by_kind["ConfigMap"]["data"]["config.pbtxt"], by_kind["Deployment"]


def pool() -> TenantPool:
    return TenantPool.model_validate(example("TenantPool", "shared"))


def cache_hits_after_identical_requests(
    config_pbtxt: str, server_args: list[str], tmp_path: Path
) -> tuple[int, int, str]:
    """(cache hits from Triton's statistics API, successful requests, metrics text)."""
    name = add_model(tmp_path / "repo", for_cpu(config_pbtxt))
    with triton.running(tmp_path / "repo", tmp_path / "work", extra_args=server_args) as server:
        with httpx.Client(base_url=server.http_url, timeout=30) as http:
            for _ in range(REQUESTS):
                http.post(f"/v2/models/{name}/infer", json=BODY).raise_for_status()
            # Triton counts a request after it has answered it: on a busy machine the
            # last one may not be counted yet when its answer arrives.
            stats = wait_for(
                f"Triton's statistics to count the {REQUESTS} answered requests",
                lambda: http.get(f"/v2/models/{name}/stats").json()["model_stats"],
                lambda s: s[0]["inference_stats"]["success"]["count"] >= REQUESTS,
                timeout=10,
            )
        metrics = server.metrics()
    inference = stats[0]["inference_stats"]
    return inference["cache_hit"]["count"], inference["success"]["count"], metrics


def metric(text: str, name: str) -> list[float]:
    return [float(v) for v in re.findall(rf"^{name}\{{[^}}]*\}} (\S+)$", text, re.MULTILINE)]


def test_the_rendered_cache_answers_repeated_requests(tmp_path: Path) -> None:
    config, deployment = rendered(response_cache=True)
    assert "response_cache {\n  enable: true\n}" in config
    args = triton.rendered_server_args(deployment)
    assert "--cache-config=local,size=16777216" in args
    hits, success, metrics = cache_hits_after_identical_requests(config, args, tmp_path)
    assert success == REQUESTS
    # The first request runs the model; every identical one after it is a hit.
    assert hits == REQUESTS - 1, hits
    assert sum(metric(metrics, "nv_cache_num_hits_per_model")) == REQUESTS - 1


def test_without_response_cache_nothing_is_cached(tmp_path: Path) -> None:
    config, deployment = rendered(response_cache=False)
    args = triton.rendered_server_args(deployment)
    assert not [a for a in args if a.startswith("--cache-config")]
    assert "response_cache" not in config
    hits, success, metrics = cache_hits_after_identical_requests(config, args, tmp_path)
    assert (hits, success) == (0, REQUESTS)
    assert sum(metric(metrics, "nv_cache_num_hits_per_model")) == 0


def test_a_cacheable_config_alone_caches_nothing(tmp_path: Path) -> None:
    """The defect this wiring fixes: the config marked the model cacheable, but the
    server was started without a cache, so every request ran the model."""
    config, deployment = rendered(response_cache=True)
    args = [a for a in triton.rendered_server_args(deployment) if "--cache-config" not in a]
    hits, success, _ = cache_hits_after_identical_requests(config, args, tmp_path)
    assert (hits, success) == (0, REQUESTS)


@pytest.mark.parametrize("flag", triton.LOCAL_FLAGS)
def test_the_local_run_sets_its_own_ports_and_repository(flag: str) -> None:
    _, deployment = rendered(response_cache=True)
    assert not [a for a in triton.rendered_server_args(deployment) if a.startswith(flag)]
