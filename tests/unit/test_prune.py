"""Pruning (shoal.reconcile.prune): what an owner holds beyond its plan goes, and nothing
else: not another owner's objects that carry its labels too, not a kind its planner does
not render, not what the plan still has."""

from __future__ import annotations

from typing import Any

from shoal.api.constants import GATEWAY_LABEL, MODEL_LABEL, OVERFLOW_OF_LABEL, POOL_LABEL
from shoal.api.inferencemodel import InferenceModel
from shoal.api.kinds import CAPACITY
from shoal.cache import key_of
from shoal.reconcile.elastic import capacity_owner
from shoal.reconcile.model import model_owner
from shoal.reconcile.overflow import twin_owner
from shoal.reconcile.pool import pool_owner
from shoal.reconcile.prune import Owner, stale
from tests.support.shoal_objects import inference_model


def obj(kind: str, name: str, namespace: str = "team-a", **labels: str) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "labels": labels}
    if namespace:
        meta["namespace"] = namespace
    return {"kind": kind, "metadata": meta}


def names(objs: list[dict[str, Any]]) -> list[str]:
    return [f"{o['kind']}/{o['metadata']['name']}" for o in objs]


def model(name: str) -> InferenceModel:
    doc = inference_model(name, "shared")
    doc["metadata"]["namespace"] = "team-a"
    return InferenceModel.model_validate(doc)


def test_what_the_plan_no_longer_has_goes_with_its_api_version() -> None:
    owner = pool_owner("shared")
    live = [
        obj("ResourceQuota", "shoal-shared", **{POOL_LABEL: "shared"}),
        obj("NetworkPolicy", "shoal-shared-deny", **{POOL_LABEL: "shared"}),
        obj("NetworkPolicy", "shoal-shared-deny", "team-b", **{POOL_LABEL: "shared"}),
    ]
    gone = stale(owner, live, {key_of(o["kind"], o) for o in live[:2]})
    assert [(o["apiVersion"], o["metadata"]["namespace"]) for o in gone] == [
        ("networking.k8s.io/v1", "team-b")
    ]


def test_another_owners_objects_with_the_same_labels_stay() -> None:
    """A model's stack and a pool's gateway carry the pool's label: the pool prunes
    neither. A twin carries the model label of its own name: the model named like it
    prunes it not."""
    live = [
        obj("NetworkPolicy", "gw", "gws", **{POOL_LABEL: "shared", GATEWAY_LABEL: "shared"}),
        obj("NetworkPolicy", "m", **{POOL_LABEL: "shared", MODEL_LABEL: "m"}),
        obj("Deployment", "m", **{POOL_LABEL: "shared", MODEL_LABEL: "m"}),
    ]
    assert stale(pool_owner("shared"), live, ()) == []
    twin = obj("Deployment", "x-overflow", **{MODEL_LABEL: "x-overflow", OVERFLOW_OF_LABEL: "x"})
    assert stale(model_owner(model("x-overflow")), [twin], ()) == []
    assert names(stale(twin_owner(model("x")), [twin], ())) == ["Deployment/x-overflow"]
    # Another model's twin that happens to have the name is not "x"'s.
    other = obj("Deployment", "x-overflow", **{MODEL_LABEL: "x-overflow", OVERFLOW_OF_LABEL: "y"})
    assert stale(twin_owner(model("x")), [other], ()) == []


def test_kinds_the_planner_does_not_render_stay() -> None:
    """A model's EndpointSlices carry its labels (the Service's): they are not its to
    delete."""
    live = [
        obj("EndpointSlice", "m-abc", **{MODEL_LABEL: "m"}),
        obj("Service", "m", **{MODEL_LABEL: "m"}),
    ]
    assert names(stale(model_owner(model("m")), live, ())) == ["Service/m"]


def test_kueue_objects_go_queues_first() -> None:
    labels = {"app.kubernetes.io/managed-by": "shoal", POOL_LABEL: "p"}
    live = [
        obj("ResourceFlavor", "p", "", **labels),
        obj("ClusterQueue", "p", "", **labels),
        obj("LocalQueue", "p", "team-a", **labels),
    ]
    owner = capacity_owner("p")
    assert owner == Owner(CAPACITY, labels)
    assert names(stale(owner, live, ())) == ["LocalQueue/p", "ClusterQueue/p", "ResourceFlavor/p"]
