"""A model's overflow replicas: the API's rules, and the twin stack rendered in the
overflow pool (pure). On the cluster: tests/cluster/test_overflow.py; through the real
gateway: tests/e2e/test_gateway_overflow.py."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from shoal.api.constants import (
    GATEWAY_LABEL,
    MODEL_LABEL,
    OVERFLOW_OF_LABEL,
    POOL_LABEL,
    ROUTED_BY_LABEL,
)
from shoal.api.inferencemodel import InferenceModel
from shoal.api.tenantpool import TenantPool
from shoal.reconcile.overflow import overflow_rank
from shoal.render.autoscaler import REQUIRED_REPLICAS_METRIC
from shoal.render.batching import effective_batching
from shoal.render.desired import model_objects
from shoal.render.documents import RenderError, render_documents
from shoal.render.overflow import overflow_name, overflow_objects
from tests.support.resources import example

UID = "0b5c6e1e-0000-4000-8000-000000000001"


def model(**overflow: Any) -> InferenceModel:
    doc = example("InferenceModel", "labs-embedder")
    doc["metadata"].update(namespace="team-a", uid=UID)
    doc["spec"]["pool"] = "critical"
    doc["spec"]["scaling"] = {
        "minReplicas": 2,
        "maxReplicas": 6,
        "predictive": {"enabled": True},
        "schedules": [{"name": "peak", "start": "0 9 * * *", "duration": "1h", "minReplicas": 4}],
    }
    doc["spec"]["overflow"] = {"pool": "shared", **overflow}
    return InferenceModel.model_validate(doc)


def pool(name: str) -> TenantPool:
    return TenantPool.model_validate(example("TenantPool", name))


def objects(im: InferenceModel) -> dict[str, dict[str, Any]]:
    rendered = overflow_objects(im, effective_batching(im, None), pool("shared"), "shoal-gw")
    return {o["kind"]: o for o in rendered}


def test_the_overflow_pool_must_be_another_pool_and_its_bounds_ordered() -> None:
    with pytest.raises(ValidationError, match=r"a pool other than spec\.pool"):
        model(pool="critical")
    with pytest.raises(ValidationError, match="minReplicas must not exceed maxReplicas"):
        model(minReplicas=3, maxReplicas=2)
    assert model().spec.overflow is not None


def test_the_twin_stack_runs_in_the_overflow_pool_and_belongs_to_the_model() -> None:
    found = objects(model())
    assert sorted(found) == [
        "ConfigMap",
        "Deployment",
        "HorizontalPodAutoscaler",
        "NetworkPolicy",
        "PodDisruptionBudget",
        "Service",
    ]
    for obj in found.values():
        meta = obj["metadata"]
        assert meta["namespace"] == "team-a"
        assert meta["labels"][OVERFLOW_OF_LABEL] == "labs-embedder"
        assert meta["name"].startswith(overflow_name("labs-embedder"))
        owner = meta["ownerReferences"][0]
        assert (owner["kind"], owner["name"], owner["uid"]) == (
            "InferenceModel",
            "labs-embedder",
            UID,
        )
    template = found["Deployment"]["spec"]["template"]
    assert template["metadata"]["labels"][POOL_LABEL] == "shared"
    assert template["metadata"]["labels"][MODEL_LABEL] == "labs-embedder-overflow"
    assert template["spec"]["priorityClassName"] == "shoal-pool-shared"
    placement = pool("shared").spec.placement
    assert template["spec"]["nodeSelector"].items() >= placement.node_selector.items()
    # The same Triton model: its config and the name clients use are the model's.
    im = model()
    config = found["ConfigMap"]["data"]["config.pbtxt"]
    assert config.startswith(f'name: "{im.spec.model.name}"\n')
    own = next(o for o in model_objects(im, None, pool("critical")) if o["kind"] == "ConfigMap")
    assert config == own["data"]["config.pbtxt"]
    assert found["Service"]["metadata"]["labels"][ROUTED_BY_LABEL] == "critical"


def test_the_twin_scales_between_the_overflow_bounds_on_its_own_queue_only() -> None:
    hpa = objects(model(minReplicas=1, maxReplicas=3))["HorizontalPodAutoscaler"]["spec"]
    assert (hpa["minReplicas"], hpa["maxReplicas"]) == (1, 3)
    metrics = [m.get("object", m.get("pods", {}))["metric"]["name"] for m in hpa["metrics"]]
    assert REQUIRED_REPLICAS_METRIC not in metrics  # no forecast of its own
    # The model's own stack keeps its bounds and its forecast.
    own = next(
        o
        for o in model_objects(model(), None, pool("critical"))
        if o["kind"] == "HorizontalPodAutoscaler"
    )
    assert (own["spec"]["minReplicas"], own["spec"]["maxReplicas"]) == (2, 6)


def test_only_the_model_pools_gateway_reaches_the_twin() -> None:
    policy = objects(model())["NetworkPolicy"]
    assert POOL_LABEL not in policy["metadata"]["labels"]  # no pool removes it as its own
    assert policy["spec"]["podSelector"] == {"matchLabels": {MODEL_LABEL: "labs-embedder-overflow"}}
    (rule,) = policy["spec"]["ingress"]
    (peer,) = rule["from"]
    assert peer["podSelector"] == {"matchLabels": {GATEWAY_LABEL: "critical"}}
    assert peer["namespaceSelector"]["matchExpressions"][0]["values"] == ["shoal-gw"]
    assert {p["port"] for p in rule["ports"]} == {8000, 8001}


def test_shoal_render_previews_the_overflow_stack_and_names_a_missing_pool() -> None:
    docs = [example("TenantPool", "critical"), example("TenantPool", "shared")]
    im = example("InferenceModel", "labs-embedder")
    im["metadata"]["namespace"] = "team-a"
    im["spec"]["pool"] = "critical"
    im["spec"]["overflow"] = {"pool": "shared"}
    rendered = render_documents([*docs, im])
    twin = [o for o in rendered if o["metadata"]["name"].startswith("labs-embedder-overflow")]
    assert sorted(o["kind"] for o in twin) == sorted(
        [
            "NetworkPolicy",
            "ConfigMap",
            "Deployment",
            "Service",
            "PodDisruptionBudget",
            "HorizontalPodAutoscaler",
        ]
    )
    with pytest.raises(RenderError, match="overflow TenantPool 'shared' is not among the files"):
        render_documents([docs[0], im])


def test_overflow_replicas_count_after_the_pools_own_models() -> None:
    def sibling(name: str, created: str, pool: str, overflow: str | None = None) -> dict[str, Any]:
        spec: dict[str, Any] = {"pool": pool}
        if overflow:
            spec["overflow"] = {"pool": overflow}
        return {"metadata": {"name": name, "creationTimestamp": created}, "spec": spec}

    siblings = [
        sibling("own-1", "2026-01-01T00:00:00Z", "shared"),
        sibling("labs-embedder", "2026-01-03T00:00:00Z", "critical", "shared"),
        sibling("early", "2026-01-02T00:00:00Z", "critical", "shared"),
        sibling("elsewhere", "2026-01-01T00:00:00Z", "critical"),
    ]
    # One model of its own, then "early" overflows into it before this one: third.
    assert overflow_rank(model(), "shared", siblings) == 2
    assert overflow_rank(model(), "shared", []) == 0
