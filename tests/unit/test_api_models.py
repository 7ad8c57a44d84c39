"""The models parse the examples, and their Python rules say what is wrong."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from shoal.api.batchpolicy import BatchPolicySpec
from shoal.api.common import parse_duration
from shoal.api.inferencemodel import InferenceModel, Scaling
from shoal.api.tenantpool import TenantPool
from tests.support.resources import example, example_documents


def test_all_examples_parse() -> None:
    docs = [d for d in example_documents() if d["apiVersion"] == "shoal.dev/v1alpha1"]
    assert {d["kind"] for d in docs} == {"InferenceModel", "TenantPool", "BatchPolicy"}
    im = InferenceModel.model_validate(example("InferenceModel", "search-ranker"))
    assert im.spec.scaling.min_replicas == 2
    assert im.spec.scaling.scale_down.stabilization_window == "10m"
    tp = TenantPool.model_validate(example("TenantPool", "critical"))
    assert tp.spec.isolation == "Dedicated"


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("5ms", 0.005), ("500us", 0.0005), ("1m30s", 90.0), ("1.5h", 5400.0), ("0s", 0.0)],
)
def test_parse_duration(text: str, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["5", "5 ms", "fast", "", "-1s", "1d"])
def test_parse_duration_rejects(text: str) -> None:
    with pytest.raises(ValueError, match="not a duration"):
        parse_duration(text)


def test_rule_messages_name_the_field() -> None:
    with pytest.raises(ValidationError, match="minReplicas: minReplicas must not exceed"):
        Scaling(min_replicas=5, max_replicas=2)
    with pytest.raises(ValidationError, match="preferredBatchSizes: every preferred batch size"):
        BatchPolicySpec(max_batch_size=8, preferred_batch_sizes=[16])


def test_defaults_follow_the_design() -> None:
    spec = BatchPolicySpec()
    assert (spec.max_batch_size, spec.max_queue_delay, spec.priority_levels) == (32, "2ms", 0)
    scaling = Scaling()
    assert scaling.min_replicas == 1
    assert scaling.scale_down.stabilization_window == "5m"


def test_no_coercion_of_types() -> None:
    with pytest.raises(ValidationError):
        BatchPolicySpec.model_validate({"maxBatchSize": "8"})
    with pytest.raises(ValidationError):
        BatchPolicySpec.model_validate({"preserveOrdering": "yes"})
