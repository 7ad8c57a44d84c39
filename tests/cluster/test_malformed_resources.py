"""Bad input is refused by the real API server, with a message that names the field."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes import client
from pydantic import ValidationError

from shoal.api.batchpolicy import BatchPolicy
from shoal.api.inferencemodel import InferenceModel
from shoal.api.tenantpool import TenantPool
from tests.support.malformed import CASES, Case
from tests.support.resources import Rejected, create

MODELS: dict[str, Any] = {
    "InferenceModel": InferenceModel,
    "TenantPool": TenantPool,
    "BatchPolicy": BatchPolicy,
}


def test_the_corpus_is_large_and_covers_every_kind() -> None:
    assert len(CASES) >= 40
    assert {c.kind for c in CASES} == set(MODELS)
    assert len({c.id for c in CASES}) == len(CASES)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_api_server_rejects_with_a_message_naming_the_field(
    case: Case, api: client.ApiClient, crds: list[str], namespace: str
) -> None:
    obj = case.build()
    if case.kind == "TenantPool" and case.id != "tp-name-too-long":
        obj["metadata"]["name"] = f"{case.id}-{namespace[-5:]}"
    with pytest.raises(Rejected) as rejected:
        create(api, obj, namespace=namespace)
    message = rejected.value.message
    assert rejected.value.status in (400, 422), message
    for fragment in case.expect:
        assert fragment in message, f"{fragment!r} not in: {message}"


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_models_reject_the_same_objects(case: Case) -> None:
    with pytest.raises(ValidationError):
        MODELS[case.kind].model_validate(case.build())
