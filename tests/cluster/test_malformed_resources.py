"""Bad input is refused by the real API server, with a message that names the field.

Each object is sent as a dry-run create: the schema, the CEL rules and the admission
policy judge it exactly as they would a create, and nothing is stored. Only an
admission case's TenantPool is really created (the policy reads it as its parameter).
The models' side of the same corpus needs no server: tests/unit/test_malformed_models.py.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from kubernetes import client

from shoal.api.admission import refusals
from shoal.api.inferencemodel import InferenceModel
from shoal.api.tenantpool import TenantPool
from tests.support.malformed import CASES, Case, case_pool
from tests.support.resources import Rejected, create, delete
from tests.support.wait import wait_for


@contextmanager
def admission_pool(api: client.ApiClient, case: Case, namespace: str) -> Iterator[str]:
    name = f"adm-{uuid.uuid4().hex[:8]}"
    pool = create(api, case_pool(case, name, namespace))
    try:
        yield name
    finally:
        delete(api, pool)


def refused(api: client.ApiClient, obj: dict[str, Any], namespace: str, retry: bool) -> Rejected:
    """The API server's refusal of ``obj`` (a dry-run create). The admission policy sees
    a new pool a moment after it is created (its informer catches up): with ``retry``,
    a create that still goes through is tried again."""

    def attempt() -> Rejected | None:
        try:
            create(api, obj, namespace=namespace, dry_run=True)
        except Rejected as rejection:
            return rejection
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
    case: Case, api: client.ApiClient, crds: list[str], module_namespace: str
) -> None:
    namespace = module_namespace
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
