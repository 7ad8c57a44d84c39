"""Valid but unusual input is accepted by the real API server, and the object it would
store parses into the same model as the one sent.

Each object is sent as a dry-run create: the server validates, defaults and prunes it
as it would a create and answers with the object it would store, storing nothing. That
the models accept the corpus is tests/unit/test_unusual_models.py's to show.
"""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes import client

from shoal.api.batchpolicy import BatchPolicy
from shoal.api.inferencemodel import InferenceModel
from shoal.api.tenantpool import TenantPool
from tests.support.resources import create
from tests.support.unusual import CASES, Case, built

MODELS: dict[str, Any] = {
    "InferenceModel": InferenceModel,
    "TenantPool": TenantPool,
    "BatchPolicy": BatchPolicy,
}


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_api_server_accepts_and_stores_the_same_spec(
    case: Case, api: client.ApiClient, crds: list[str], module_namespace: str
) -> None:
    obj = built(case)
    stored = create(api, obj, namespace=module_namespace, dry_run=True)
    model = MODELS[case.kind]
    assert model.model_validate(stored).spec == model.model_validate(obj).spec
