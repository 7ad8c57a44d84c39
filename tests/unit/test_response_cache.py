"""spec.model.responseCache starts Triton with a cache of spec.runtime.responseCacheSize.

A model config's ``response_cache { enable: true }`` only marks the model cacheable;
Triton caches nothing unless the server is started with ``--cache-config``.
tests/e2e/test_response_cache.py shows the hits on the real tritonserver.
"""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from shoal.api.inferencemodel import InferenceModel, Runtime
from shoal.api.tenantpool import TenantPool
from shoal.render.workload import deployment as render_deployment
from shoal.render.workload import response_cache_bytes, triton_args
from tests.support.resources import example


def model(cache: bool, **runtime: Any) -> InferenceModel:
    doc = example("InferenceModel", "labs-embedder")
    doc["spec"]["model"]["responseCache"] = cache
    doc["spec"]["runtime"] = {**doc["spec"]["runtime"], **runtime}
    return InferenceModel.model_validate(doc)


def deployment(im: InferenceModel) -> dict[str, Any]:
    """The Triton container's resources."""
    pool = TenantPool.model_validate(example("TenantPool", "shared"))
    rendered = render_deployment(im, pool.spec, "config")
    resources: dict[str, Any] = rendered["spec"]["template"]["spec"]["containers"][0]["resources"]
    return resources


def cache_args(im: InferenceModel) -> list[str]:
    return [a for a in triton_args(im) if a.startswith("--cache-config")]


def test_no_cache_without_response_cache() -> None:
    assert cache_args(model(False)) == []
    assert cache_args(model(False, responseCacheSize="1Gi")) == []
    assert response_cache_bytes(model(False)) is None


@pytest.mark.parametrize(
    ("runtime", "size"),
    [
        ({}, 256 * 2**20),  # the default
        ({"responseCacheSize": "1Gi"}, 2**30),
        ({"responseCacheSize": "500M"}, 500_000_000),
        ({"responseCacheSize": "2097152"}, 2**21),
        ({"memory": "512Mi"}, 256 * 2**20),
    ],
)
def test_the_cache_size_in_bytes(runtime: dict[str, Any], size: int) -> None:
    im = model(True, **runtime)
    assert response_cache_bytes(im) == size
    assert cache_args(im) == [f"--cache-config=local,size={size}"]


@pytest.mark.parametrize(
    ("size", "message"),
    [
        ("512Ki", "from 1Mi to 1Ti"),
        ("2Ti", "from 1Mi to 1Ti"),
    ],
)
def test_sizes_out_of_bounds_are_refused(size: str, message: str) -> None:
    with pytest.raises(ValidationError, match=f"responseCacheSize: .*{message}"):
        model(True, responseCacheSize=size, memory="16Gi")


@pytest.mark.parametrize("size", ["0", "1.5Gi", "256mi", "1e9", "-1Gi", "1Pi"])
def test_only_whole_byte_sizes_parse(size: str) -> None:
    with pytest.raises(ValidationError, match="responseCacheSize"):
        Runtime.model_validate({"responseCacheSize": size})


def test_the_cache_is_added_to_the_replicas_memory() -> None:
    """Triton allocates the cache beside what the model needs: the replica asks for both."""
    resources = deployment(model(True, memory="16Gi", responseCacheSize="1Gi"))
    assert resources["requests"]["memory"] == resources["limits"]["memory"] == str(17 * 2**30)
    as_number = deployment(model(True, memory=17179869184))
    assert as_number["limits"]["memory"] == str(16 * 2**30 + 256 * 2**20)
    plain = deployment(model(False, memory="16Gi", responseCacheSize="1Gi"))
    assert plain["requests"]["memory"] == plain["limits"]["memory"] == "16Gi"
