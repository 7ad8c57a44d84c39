"""Valid but unusual input is accepted by the real API server and by the models alike,
and the object the server stores parses into the same model."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from kubernetes import client

from shoal.api.batchpolicy import BatchPolicy
from shoal.api.inferencemodel import InferenceModel
from shoal.api.tenantpool import TenantPool
from tests.support.resources import create, delete
from tests.support.unusual import CASES, Case

MODELS: dict[str, Any] = {
    "InferenceModel": InferenceModel,
    "TenantPool": TenantPool,
    "BatchPolicy": BatchPolicy,
}


def test_the_corpus_covers_every_kind() -> None:
    assert len(CASES) >= 40
    assert {c.kind for c in CASES} == set(MODELS)
    assert len({c.id for c in CASES}) == len(CASES)


def _attribute(model: Any, path: str) -> Any:
    for part in path.split("."):
        model = getattr(model, part)
    return model


def built(case: Case) -> dict[str, Any]:
    obj = case.build()
    suffix = uuid.uuid4().hex[:6]
    obj["metadata"]["name"] = f"u-{suffix}"
    if case.kind == "InferenceModel":
        # A pool that does not exist: the admission policy has nothing to judge.
        obj["spec"]["pool"] = f"no-pool-{suffix}"
    return obj


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_models_accept(case: Case) -> None:
    parsed = MODELS[case.kind].model_validate(built(case))
    for path, value in case.expect:
        assert _attribute(parsed, path) == value, path


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_api_server_accepts_and_stores_the_same_spec(
    case: Case, api: client.ApiClient, crds: list[str], namespace: str
) -> None:
    obj = built(case)
    stored = create(api, obj, namespace=namespace)
    try:
        model = MODELS[case.kind]
        assert model.model_validate(stored).spec == model.model_validate(obj).spec
    finally:
        delete(api, stored)
