"""The malformed corpus (tests/support/malformed.py) is refused by the pydantic models
and the operator's mirror of the admission policy, as the API server refuses it
(tests/cluster/test_malformed_resources.py): no API server needed here."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from shoal.api.admission import refusals
from shoal.api.crd import KINDS
from shoal.api.inferencemodel import InferenceModel
from shoal.api.tenantpool import TenantPool
from tests.support.malformed import CASES, Case, case_pool

# Each kind's pydantic model, from the table the CRDs are generated from.
MODELS: dict[str, Any] = {kind.name: kind.model for kind in KINDS}


def test_the_corpus_is_large_and_covers_every_kind() -> None:
    assert len(CASES) >= 40
    assert {c.kind for c in CASES} == set(MODELS)
    assert len({c.id for c in CASES}) == len(CASES)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_models_reject_the_same_objects(case: Case) -> None:
    if case.pool is None:
        with pytest.raises(ValidationError):
            MODELS[case.kind].model_validate(case.build())
        return
    # The spec is valid; the pool's admission refuses it, in the policy's words.
    obj = case.build()
    obj["metadata"]["namespace"] = "tenant"
    model = InferenceModel.model_validate(obj)
    pool = TenantPool.model_validate(case_pool(case, obj["spec"]["pool"], "tenant"))
    reasons = refusals(pool, model, {"kubernetes.io/metadata.name": "tenant"})
    assert reasons
    for fragment in case.expect:
        assert any(fragment in reason for reason in reasons), (fragment, reasons)
