"""Two of a namespace's models in one pool with the same Triton model name would share
one gateway URL (/v2/models/<name>), which reaches only one of them: the later one is
refused, with the earlier named, and served once the earlier goes or either is renamed
or moved to another pool."""

from __future__ import annotations

import copy
from typing import Any

from shoal.api.inferencemodel import InferenceModel
from shoal.api.tenantpool import TenantPool
from shoal.reconcile.model import admission_refusal
from tests.support.resources import example

NAMESPACE = "team-search"
LABELS = {"kubernetes.io/metadata.name": NAMESPACE}


def _doc(name: str, created: str, triton_name: str = "ranker", pool: str = "critical") -> Any:
    doc = copy.deepcopy(example("InferenceModel", "search-ranker"))
    doc["metadata"] = {"name": name, "namespace": NAMESPACE, "creationTimestamp": created}
    doc["spec"]["model"]["name"] = triton_name
    doc["spec"]["pool"] = pool
    return doc


def _pool(gateway: bool = True) -> TenantPool:
    doc = copy.deepcopy(example("TenantPool", "critical"))
    doc["spec"]["tenants"] = {"namespaces": [NAMESPACE]}
    doc["spec"].setdefault("gateway", {})["enabled"] = gateway
    return TenantPool.model_validate(doc)


def _refusal(doc: Any, siblings: list[Any]) -> tuple[str, str] | None:
    return admission_refusal(InferenceModel.model_validate(doc), _pool(), LABELS, siblings)


def test_the_later_model_with_a_taken_name_is_refused_and_told_which_has_it() -> None:
    first = _doc("ranker-a", "2026-12-01T10:00:00Z")
    second = _doc("ranker-b", "2026-12-01T11:00:00Z")
    assert _refusal(first, [first, second]) is None
    refused = _refusal(second, [first, second])
    assert refused is not None
    reason, message = refused
    assert reason == "ModelNameTaken"
    assert "InferenceModel 'ranker-a'" in message
    assert "/v2/models/ranker" in message
    # Before it is in the cache (just created), it is the later one too.
    assert _refusal(second, [first]) == refused


def test_the_same_second_is_settled_by_name_as_the_gateway_settles_it() -> None:
    a = _doc("ranker-a", "2026-12-01T10:00:00Z")
    b = _doc("ranker-b", "2026-12-01T10:00:00Z")
    assert _refusal(a, [b, a]) is None
    assert _refusal(b, [b, a]) is not None


def test_it_is_served_once_the_earlier_goes_or_either_differs() -> None:
    second = _doc("ranker-b", "2026-12-01T11:00:00Z")
    assert _refusal(second, [second]) is None  # the earlier one deleted
    renamed = _doc("ranker-a", "2026-12-01T10:00:00Z", triton_name="ranker-v2")
    assert _refusal(second, [renamed, second]) is None
    elsewhere = _doc("ranker-a", "2026-12-01T10:00:00Z", pool="batch")
    assert _refusal(second, [elsewhere, second]) is None


def test_a_pool_without_a_gateway_serves_both_at_their_own_services() -> None:
    first = _doc("ranker-a", "2026-12-01T10:00:00Z")
    second = _doc("ranker-b", "2026-12-01T11:00:00Z")
    model = InferenceModel.model_validate(second)
    assert admission_refusal(model, _pool(gateway=False), LABELS, [first, second]) is None
