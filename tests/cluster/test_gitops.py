"""GitOps safety and Pod Security, on the real API server with the real operator."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from e2e.operator import OperatorProcess
from kubernetes import client

from shoal.api.constants import KEPT_ON_UNINSTALL
from tests.support.passes import wait_for_passes
from tests.support.shoal_objects import Shoal, condition, inference_model, wait_ready
from tests.support.wait import wait_for

REPO = Path(__file__).resolve().parents[2]
EXAMPLES, CRDS, MANIFESTS = REPO / "examples", REPO / "crds", REPO / "manifests"


def _user_view(obj: dict[str, Any]) -> dict[str, Any]:
    meta = obj["metadata"]
    return {
        "spec": obj["spec"],
        "labels": meta.get("labels") or {},
        "annotations": meta.get("annotations") or {},
    }


def _applied_part(obj: dict[str, Any]) -> dict[str, Any]:
    """``obj`` without its status, its resourceVersion and the record of who wrote the
    status."""
    meta = {
        k: v for k, v in obj["metadata"].items() if k not in ("resourceVersion", "managedFields")
    }
    managed = [
        e for e in obj["metadata"].get("managedFields", []) if e.get("subresource") != "status"
    ]
    return {
        **{k: v for k, v in obj.items() if k != "status"},
        "metadata": {**meta, "managedFields": managed},
    }


def test_applying_the_same_yaml_twice_changes_nothing(
    kubectl: Callable[..., str], crds: list[str], operator: OperatorProcess, api: client.ApiClient
) -> None:
    """As Argo CD or Flux would: server-side apply, let the operator settle, apply again.
    The second apply changes nothing, and the operator touched only status."""
    apply = [
        "apply",
        "--server-side",
        "--field-manager=argocd-controller",
        f"--filename={EXAMPLES}",
    ]
    kubectl(*apply)
    shoal = Shoal(api)
    wait_ready(shoal, "team-search", "search-ranker", timeout=120)
    # The HPA's first evaluation changes the model's AutoscalerReady: let it land first.
    wait_for(
        "the model's autoscaler to be evaluated",
        lambda: shoal.get("InferenceModel", "search-ranker", "team-search"),
        lambda m: condition(m, "AutoscalerReady").get("status") in ("True", "False"),
        timeout=60,
    )
    wait_for_passes(
        operator.metrics_url, rounds=2, kinds=("InferenceModel", "TenantPool", "BatchPolicy")
    )

    docs = [
        d
        for d in yaml.safe_load_all(
            "\n---\n".join(p.read_text() for p in sorted(EXAMPLES.glob("*.yaml")))
        )
        if d
    ]
    custom = [d for d in docs if d["apiVersion"].startswith("shoal.dev/")]

    def live(doc: dict[str, Any]) -> dict[str, Any]:
        return shoal.get(doc["kind"], doc["metadata"]["name"], doc["metadata"].get("namespace"))

    before = {(d["kind"], d["metadata"]["name"]): live(d) for d in custom}
    again = kubectl(*apply)
    for line in again.splitlines():
        assert line.endswith("serverside-applied"), line
    for doc in custom:
        now = live(doc)
        key = (doc["kind"], doc["metadata"]["name"])
        # The apply's own effect: all but status. The operator may write a status in
        # between for its own reasons (a pool counts replicas and GPUs in use), which
        # changes the resourceVersion and no field the apply sets.
        assert _applied_part(now) == _applied_part(before[key]), f"{key} changed on re-apply"
        view = _user_view(now)
        assert set(view["labels"]) <= set(doc["metadata"].get("labels") or {}), view["labels"]
        assert view["annotations"] == {}, view["annotations"]
        # Only the GitOps tool manages the spec; the operator owns status, and on a pool in
        # use the finalizer that holds its deletion: nothing else.
        for entry in now["metadata"]["managedFields"]:
            if entry["manager"] == "shoal-operator" and not entry.get("subresource"):
                assert entry["fieldsV1"] == {
                    "f:metadata": {"f:finalizers": {".": {}, 'v:"shoal.dev/pool-in-use"': {}}}
                }, entry


def test_model_pods_pass_the_restricted_pod_security_profile(
    api: client.ApiClient, operator: OperatorProcess, namespace: str
) -> None:
    """The real PodSecurity admission, enforcing `restricted` on the namespace, admits
    the Triton pods the operator's Deployment asks for."""
    core = client.CoreV1Api(api)
    core.patch_namespace(
        namespace,
        {
            "metadata": {
                "labels": {
                    "pod-security.kubernetes.io/enforce": "restricted",
                    "pod-security.kubernetes.io/enforce-version": "latest",
                }
            }
        },
    )
    # Control: a root, privileged-escalating pod is refused here.
    bad = client.V1Pod(
        metadata=client.V1ObjectMeta(name="rooty"),
        spec=client.V1PodSpec(containers=[client.V1Container(name="c", image="x")]),
    )
    with pytest.raises(client.ApiException) as refused:
        core.create_namespaced_pod(namespace, bad)
    assert refused.value.status == 403
    assert refused.value.body is not None
    assert "violates PodSecurity" in refused.value.body
    shoal = Shoal(api)
    with shoal.pool([namespace]) as pool:
        shoal.create(inference_model("secure", pool), namespace)
        wait_ready(shoal, namespace, "secure")
        pods = core.list_namespaced_pod(namespace, label_selector="shoal.dev/model=secure").items
        assert pods
        assert all(p.status.phase == "Running" for p in pods)


def test_kustomize_installs_in_parts_and_deleting_the_operator_keeps_the_tenants(
    kubectl: Callable[..., str], crds: list[str]
) -> None:
    """`kubectl apply -k` of crds, manifests/gateways and manifests/default, as a cluster
    admin would (server-side). What outlives the operator carries the keep annotations of
    Helm, Argo CD and Flux, as the API server stores it. Then `kubectl delete -k
    manifests/default` in a server-side dry run: it would delete exactly the objects of
    manifests/default (the operator's), no CRD and nothing in the gateways' namespace
    but the operator's own Role there."""
    parts = {name: MANIFESTS / name for name in ("gateways", "default", "admission")}
    installed = kubectl("apply", "--server-side", "--force-conflicts", "-k", str(CRDS))
    for name in ("gateways", "default", "admission"):
        installed += kubectl("apply", "--server-side", "--force-conflicts", "-k", str(parts[name]))
    for expected in (
        "customresourcedefinition.apiextensions.k8s.io/inferencemodels.shoal.dev",
        "namespace/shoal-gateways",
        "serviceaccount/shoal-gateway",
        "clusterrole.rbac.authorization.k8s.io/shoal-operator",
        "serviceaccount/shoal-operator",
        "deployment.apps/shoal-operator",
        "validatingadmissionpolicy",
    ):
        assert expected in installed, installed

    for kept in (CRDS, parts["gateways"]):
        for doc in yaml.safe_load_all(kubectl("kustomize", str(kept))):
            namespace = doc["metadata"].get("namespace")
            where = [f"--namespace={namespace}"] if namespace else []
            live = json.loads(
                kubectl("get", doc["kind"], doc["metadata"]["name"], *where, "-o", "json")
            )
            annotations = live["metadata"].get("annotations") or {}
            assert KEPT_ON_UNINSTALL.items() <= annotations.items(), (doc["kind"], annotations)

    operator = [d for d in yaml.safe_load_all(kubectl("kustomize", str(parts["default"]))) if d]
    dry_run = kubectl("delete", "--dry-run=server", "-k", str(parts["default"]))
    deleted = {
        (kind.split(".", 1)[0], name, namespace)
        for kind, name, namespace in re.findall(
            r'^(\S+) "([^"]+)" deleted(?: from (\S+) namespace)? \(server dry run\)$',
            dry_run,
            re.M,
        )
    }
    assert deleted == {
        (d["kind"].lower(), d["metadata"]["name"], d["metadata"].get("namespace", ""))
        for d in operator
    }, dry_run
    assert "customresourcedefinition" not in {kind for kind, _, _ in deleted}
    assert ("namespace", "shoal-gateways", "") not in deleted
    assert not {(k, n) for k, n, _ in deleted} & {("serviceaccount", "shoal-gateway")}
    in_gateways = {
        d["kind"] for d in operator if d["metadata"].get("namespace") == "shoal-gateways"
    }
    assert in_gateways == {"Role", "RoleBinding"}  # the operator's own rights there


def test_the_operators_own_pod_passes_the_restricted_profile(
    api: client.ApiClient, crds: list[str], operator_kubeconfig: Path
) -> None:
    """shoal-system enforces `restricted`; the operator Deployment's pods (a leader and a
    follower) are admitted."""
    core = client.CoreV1Api(api)
    labels = core.read_namespace("shoal-system").metadata.labels
    assert labels is not None
    assert labels["pod-security.kubernetes.io/enforce"] == "restricted"
    pods = wait_for(
        "the operator's two pods admitted and Running",
        lambda: (
            core.list_namespaced_pod(
                "shoal-system", label_selector="app.kubernetes.io/component=operator"
            ).items
        ),
        lambda ps: len(ps) == 2 and all(p.status.phase == "Running" for p in ps),
        timeout=60,
    )
    assert all(p.spec.security_context.run_as_non_root is True for p in pods)
