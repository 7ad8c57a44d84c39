"""Bad input is refused by the real API server, with a message that names the field."""

from __future__ import annotations

import copy
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from kubernetes import client
from pydantic import ValidationError

from shoal.api.admission import refusals
from shoal.api.batchpolicy import BatchPolicy
from shoal.api.inferencemodel import InferenceModel
from shoal.api.tenantpool import TenantPool
from tests.support.malformed import CASES, Case
from tests.support.resources import Rejected, create, delete, example
from tests.support.wait import wait_for

MODELS: dict[str, Any] = {
    "InferenceModel": InferenceModel,
    "TenantPool": TenantPool,
    "BatchPolicy": BatchPolicy,
}


def test_the_corpus_is_large_and_covers_every_kind() -> None:
    assert len(CASES) >= 40
    assert {c.kind for c in CASES} == set(MODELS)
    assert len({c.id for c in CASES}) == len(CASES)


def case_pool(case: Case, name: str, namespace: str) -> dict[str, Any]:
    """The TenantPool an admission case is judged against: the example pool the model
    names, with the case's changes, admitting ``namespace``."""
    assert case.pool is not None
    pool = example("TenantPool", case.build()["spec"]["pool"])
    pool["metadata"] = {"name": name}
    pool["spec"] = {**pool["spec"], **copy.deepcopy(case.pool)}
    pool["spec"]["tenants"] = {"namespaces": [namespace]}
    return pool


@contextmanager
def admission_pool(api: client.ApiClient, case: Case, namespace: str) -> Iterator[str]:
    name = f"adm-{uuid.uuid4().hex[:8]}"
    pool = create(api, case_pool(case, name, namespace))
    try:
        yield name
    finally:
        delete(api, pool)


def refused(api: client.ApiClient, obj: dict[str, Any], namespace: str, retry: bool) -> Rejected:
    """The API server's refusal of ``obj``. The admission policy sees a new pool a moment
    after it is created (its informer catches up): with ``retry``, a create that still
    goes through is undone and tried again."""

    def attempt() -> Rejected | None:
        try:
            stored = create(api, obj, namespace=namespace)
        except Rejected as rejection:
            return rejection
        delete(api, {**stored, "metadata": {**stored["metadata"], "namespace": namespace}})
        return None

    if not retry:
        rejection = attempt()
        assert rejection is not None, "the API server accepted the object"
        return rejection
    found = wait_for("the API server to refuse", attempt, lambda r: r is not None, timeout=20)
    assert found is not None
    return found


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_api_server_rejects_with_a_message_naming_the_field(
    case: Case, api: client.ApiClient, crds: list[str], namespace: str
) -> None:
    obj = case.build()
    if case.kind == "TenantPool" and case.id != "tp-name-too-long":
        obj["metadata"]["name"] = f"{case.id}-{namespace[-5:]}"[-52:].lstrip("-")
    touches_pool = any(path.startswith("spec.pool") for path, _ in case.changes)
    if case.kind == "InferenceModel" and "spec" in obj and case.pool is None and not touches_pool:
        # A pool that does not exist (the examples' may, from other tests): only the
        # schema judges the object, not the admission policy.
        obj["spec"]["pool"] = f"no-pool-{namespace[-5:]}"
    if case.pool is not None:
        with admission_pool(api, case, namespace) as pool:
            obj["spec"]["pool"] = pool
            rejection = refused(api, obj, namespace, retry=True)
        assert rejection.status == 403, rejection.message
        # The operator's mirror of the policy gives the same first reason.
        model = InferenceModel.model_validate(
            {**obj, "metadata": {"name": "m", "namespace": namespace}}
        )
        judge = TenantPool.model_validate(case_pool(case, pool, namespace))
        reasons = refusals(judge, model, {"kubernetes.io/metadata.name": namespace})
        assert reasons, rejection.message
        assert reasons[0] in rejection.message
    else:
        rejection = refused(api, obj, namespace, retry=False)
        assert rejection.status in (400, 422), rejection.message
    for fragment in case.expect:
        assert fragment in rejection.message, f"{fragment!r} not in: {rejection.message}"


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
