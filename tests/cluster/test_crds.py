"""The generated CRDs install on a real API server and the examples apply cleanly."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

import pytest
from kubernetes import client

from shoal.api.batchpolicy import BatchPolicy
from shoal.api.inferencemodel import InferenceModel
from shoal.api.tenantpool import TenantPool
from tests.support.resources import EXAMPLES, example_documents

MODELS: dict[str, Any] = {
    "InferenceModel": InferenceModel,
    "TenantPool": TenantPool,
    "BatchPolicy": BatchPolicy,
}


@pytest.fixture(scope="module")
def applied_examples(crds: list[str], kubectl: Callable[..., str]) -> str:
    """kubectl apply --server-side of examples/, as a GitOps tool would (strict fields)."""
    return kubectl("apply", "--server-side", "--field-manager=gitops", f"--filename={EXAMPLES}")


def test_crds_are_established(crds: list[str], kubectl: Callable[..., str]) -> None:
    out = kubectl("get", "crd", "-o", "name", *[c.removeprefix("crd/") for c in crds])
    assert len(out.split()) == 3, out


def test_examples_apply_cleanly(applied_examples: str) -> None:
    docs = [d for d in example_documents() if d["apiVersion"].startswith("shoal.dev/")]
    assert len(docs) >= 7
    for doc in docs:
        assert f"{doc['kind'].lower()}.shoal.dev/{doc['metadata']['name']}" in applied_examples
    assert "Warning" not in applied_examples, applied_examples


def test_stored_examples_parse_back_into_the_models_unchanged(
    applied_examples: str, api: client.ApiClient
) -> None:
    """The API server's defaulting agrees with the models' defaults, field by field."""
    custom = client.CustomObjectsApi(api)
    for doc in example_documents():
        if not doc["apiVersion"].startswith("shoal.dev/"):
            continue
        model = MODELS[doc["kind"]]
        plural = f"{doc['kind'].lower()}s".replace("policys", "policies")
        if doc["kind"] == "TenantPool":
            result = custom.get_cluster_custom_object(
                "shoal.dev", "v1alpha1", plural, doc["metadata"]["name"]
            )
        else:
            result = custom.get_namespaced_custom_object(
                "shoal.dev",
                "v1alpha1",
                doc["metadata"]["namespace"],
                plural,
                doc["metadata"]["name"],
            )
        # The client types a custom object `object`; the server sends it as a JSON mapping.
        stored = cast("dict[str, Any]", result)
        assert model.model_validate(stored).spec == model.model_validate(doc).spec, doc
        # The server filled in the defaults the models declare, e.g.:
        if doc["kind"] == "InferenceModel":
            assert stored["spec"]["scaling"]["scaleUp"] == {"stabilizationWindow": "0s"}
            # No default image: unset, the operator's setting names it (a mirror's).
            assert "image" not in stored["spec"]["runtime"]


def test_kubectl_explain_teaches_the_fields(crds: list[str], kubectl: Callable[..., str]) -> None:
    out = kubectl("explain", "inferencemodel.spec.scaling")
    assert "minReplicas" in out
    assert "warm pool" in out
    out = kubectl("explain", "batchpolicy.spec.maxQueueDelay")
    assert "Longest a request waits" in out


def test_printer_columns_and_short_names(
    applied_examples: str, kubectl: Callable[..., str]
) -> None:
    out = kubectl("get", "im", "-A")
    header = out.splitlines()[0].split()
    assert header[:4] == ["NAMESPACE", "NAME", "POOL", "READY"], header
    assert {"REPLICAS", "QUEUE", "P95", "AGE"} <= set(header), header
    assert "critical" in out
    tp = kubectl("get", "tp")
    assert tp.splitlines()[0].split()[:3] == ["NAME", "ISOLATION", "READY"]
    assert "Dedicated" in tp
    bp = kubectl("get", "bp", "-A")
    assert "500us" in bp
    assert "MAX BATCH" in bp.splitlines()[0]
    shoal = kubectl("get", "shoal", "-A", "-o", "name")
    assert len(shoal.split()) >= 7, shoal
