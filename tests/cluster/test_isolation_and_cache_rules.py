"""The rules of access.modelDownload, the access lists and runtime.responseCacheSize, on
the real API server: what it refuses (naming the field) and what it accepts, the
accepted object as it would store it parsing into the same model. The corpus is
tests/support/access_rules.py; that the models refuse the same objects is
tests/unit/test_access_rule_models.py's to show.

Each object is sent as a dry-run create: judged as a create would be, nothing stored.
"""

from __future__ import annotations

import copy
import time
import uuid
from typing import Any

import pytest
from kubernetes import client

from tests.support.access_rules import ACCEPTED, MODELS, REFUSED, TP
from tests.support.malformed import Case
from tests.support.resources import Rejected, create


def unique(obj: dict[str, Any], case_id: str, namespace: str) -> dict[str, Any]:
    if obj["kind"] == TP:
        obj["metadata"]["name"] = f"{case_id[:40]}-{uuid.uuid4().hex[:5]}"
    else:
        obj["metadata"]["namespace"] = namespace
    return obj


@pytest.mark.parametrize("case", REFUSED, ids=lambda c: c.id)
def test_api_server_refuses_naming_the_field(
    case: Case, api: client.ApiClient, crds: list[str], module_namespace: str
) -> None:
    namespace = module_namespace
    obj = unique(case.build(), case.id, namespace)
    started = time.monotonic()
    with pytest.raises(Rejected) as rejected:
        create(api, obj, namespace=namespace, dry_run=True)
    # The huge exponent must never reach the API server's quantity parser.
    assert time.monotonic() - started < 10
    message = rejected.value.message
    assert rejected.value.status in (400, 422), message
    for fragment in case.expect:
        assert fragment in message, f"{fragment!r} not in: {message}"


@pytest.mark.parametrize("case_id", ACCEPTED)
def test_api_server_and_models_accept(
    case_id: str, api: client.ApiClient, crds: list[str], module_namespace: str
) -> None:
    namespace = module_namespace
    obj = unique(copy.deepcopy(ACCEPTED[case_id]), case_id, namespace)
    model = MODELS[obj["kind"]]
    parsed = model.model_validate(obj)
    stored = create(api, obj, namespace=namespace, dry_run=True)
    # As it would be stored, with the server's defaults, it parses back to the same spec.
    assert model.model_validate(stored).spec == parsed.spec
