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
from shoal.render.workload import response_cache_bytes, triton_args
from tests.support.resources import example


def model(cache: bool, **runtime: Any) -> InferenceModel:
    doc = example("InferenceModel", "labs-embedder")
    doc["spec"]["model"]["responseCache"] = cache
    doc["spec"]["runtime"] = {**doc["spec"]["runtime"], **runtime}
    return InferenceModel.model_validate(doc)


def cache_args(im: InferenceModel) -> list[str]:
    return [a for a in triton_args(im) if a.startswith("--cache-config")]


def test_no_cache_without_response_cache() -> None:
    assert cache_args(model(False)) == []
    assert cache_args(model(False, responseCacheSize="1Gi")) == []
    assert response_cache_bytes(model(False)) is None


@pytest.mark.parametrize(
    ("runtime", "size"),
    [
        ({}, 256 * 2**20),  # the default, within 16Gi of memory
        ({"responseCacheSize": "1Gi"}, 2**30),
        ({"responseCacheSize": "500M"}, 500_000_000),
        ({"responseCacheSize": "2097152"}, 2**21),
        # The default is a quarter of memory when 256Mi would not fit comfortably.
        ({"memory": "512Mi"}, 128 * 2**20),
        ({"memory": 536870912}, 128 * 2**20),
        ({"memory": "2Mi"}, 2**20),  # never under the minimum
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
        ("9Gi", "at most half of memory"),  # memory is 16Gi
    ],
)
def test_sizes_out_of_bounds_are_refused(size: str, message: str) -> None:
    with pytest.raises(ValidationError, match=f"responseCacheSize: .*{message}"):
        model(True, responseCacheSize=size, memory="16Gi")


@pytest.mark.parametrize("size", ["0", "1.5Gi", "256mi", "1e9", "-1Gi", "1Pi"])
def test_only_whole_byte_sizes_parse(size: str) -> None:
    with pytest.raises(ValidationError, match="responseCacheSize"):
        Runtime.model_validate({"responseCacheSize": size})


def test_half_of_memory_is_the_most() -> None:
    assert Runtime.model_validate({"memory": "16Gi", "responseCacheSize": "8Gi"})
    assert Runtime.model_validate({"memory": 17179869184, "responseCacheSize": "8Gi"})
    assert Runtime.model_validate({"memory": "16e9", "responseCacheSize": "8G"})


def test_memory_written_with_a_huge_exponent_is_never_compared() -> None:
    """The API server's quantity parser takes minutes on e-99999999: the rule refuses
    such a memory before comparing, and so does Python."""
    with pytest.raises(ValidationError, match="plain quantity"):
        Runtime.model_validate({"memory": "1e-99999999", "responseCacheSize": "1Mi"})
    # Without a cache size nothing is compared, and the default size is computed safely.
    im = model(True, memory="1e99999999")
    assert response_cache_bytes(im) == 256 * 2**20
