"""``shoal doctor`` against the real API server: it passes the installation the
fixtures make, and each fault introduced here (then undone) is reported, with its fix
and a non-zero exit.

The command runs as a user would run it (``python -m shoal.cli doctor -o json``). The
cluster tier has no metrics adapter and no operator holding the Lease, so each test
runs only the checks it is about (``--skip`` the others); tests/e2e/test_doctor_monitoring.py
runs the metrics API and Prometheus checks against the real Prometheus and adapter.
"""

from __future__ import annotations

import datetime as dt
import re
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from e2e.cluster.target import Target
from e2e.install import REPO, Kubectl
from kubernetes import client

from shoal.api.admission_policy import NAME as ADMISSION_NAME
from shoal.api.inferencemodel import InferenceModel
from shoal.api.tenantpool import TenantPool
from shoal.doctor.checks import CRD_NAMES, CUSTOM_METRICS, OPERATOR_SELECTOR, check_crd
from shoal.doctor.findings import Status
from shoal.doctor.probe import Cluster
from shoal.kube.client import Kube
from shoal.leader import LEASE_NAME
from shoal.render.autoscaler import horizontal_autoscaler
from shoal.render.batching import effective_batching
from tests.support.doctor import doctor
from tests.support.shoal_objects import Shoal, inference_model, shared_pool
from tests.support.wait import wait_for

POLICY = REPO / "manifests" / "admission" / "admission-policy.yaml"
BINDING = f"ValidatingAdmissionPolicyBinding {ADMISSION_NAME}"


def as_body(obj: dict[str, Any]) -> Any:
    """A JSON object for the typed client's create calls, which send a dict as it is."""
    return obj


def test_the_installed_crds_and_admission_policy_pass(
    crds: list[str], kube_target: Target, namespace: str
) -> None:
    """As the fixture installs them (crds/, then manifests/admission): ok, and the
    live CRDs hold exactly the schema this release generates (no drift warning)."""
    status, found = doctor(kube_target, "crds")
    assert status == 0
    assert {name: f["status"] for name, f in found.items()} == {
        f"CRD {name}": Status.OK for name in CRD_NAMES
    }
    status, found = doctor(kube_target, "admission")
    assert status == 0
    assert [f["status"] for f in found.values()] == [Status.OK, Status.OK]
    # A namespace without models has no HPA to complain about.
    status, found = doctor(kube_target, "autoscalers", f"--namespace={namespace}")
    assert status == 0
    assert found["Shoal's HPAs"]["message"] == "no HPA labelled app.kubernetes.io/managed-by=shoal"


def test_a_deleted_admission_binding_is_reported_until_it_is_restored(
    crds: list[str], kube_target: Target, kubectl: Kubectl
) -> None:
    kubectl("delete", "validatingadmissionpolicybinding", ADMISSION_NAME)
    try:
        status, found = doctor(kube_target, "admission")
    finally:
        kubectl("apply", "--server-side", "--force-conflicts", f"--filename={POLICY}")
    assert status == 1
    binding = found[BINDING]
    assert binding["status"] == Status.FAIL
    assert binding["message"].startswith("missing: the policy is not enforced")
    assert "kubectl apply --server-side -k manifests/admission" in binding["fix"]
    assert found[f"ValidatingAdmissionPolicy {ADMISSION_NAME}"]["status"] == Status.OK
    status, found = doctor(kube_target, "admission")
    assert (status, found[BINDING]["status"]) == (0, Status.OK)


@pytest.fixture
def crd_group(kubectl: Kubectl) -> Iterator[str]:
    """A throwaway API group for CRDs of the test's own (Shoal's are never touched:
    deleting one deletes every object of its kind, other tests' too)."""
    group = f"doctor-{uuid.uuid4().hex[:8]}.example.com"
    yield group
    kubectl("delete", "crd", "--ignore-not-found", f"alphas.{group}", f"betas.{group}")


def _crd(group: str, plural: str, kind: str) -> dict[str, Any]:
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{group}"},
        "spec": {
            "group": group,
            "names": {"kind": kind, "plural": plural, "listKind": f"{plural.title()}List"},
            "scope": "Namespaced",
            "versions": [
                {
                    "name": "v1alpha1",
                    "served": True,
                    "storage": True,
                    "schema": {"openAPIV3Schema": {"type": "object"}},
                }
            ],
        },
    }


def test_a_crd_that_is_not_established_is_a_failure(api: client.ApiClient, crd_group: str) -> None:
    """Shoal's CRDs stay as they are; the check itself (the one ``shoal doctor`` runs
    for each of them) is given real CRDs of a throwaway group: one whose kind another
    CRD of its group already claims, which the API server never establishes, and one
    that does not exist."""
    extensions = client.ApiextensionsV1Api(api)
    cluster = Cluster(Kube(api))
    first, taken = f"alphas.{crd_group}", f"betas.{crd_group}"
    extensions.create_custom_resource_definition(as_body(_crd(crd_group, "alphas", "Alpha")))
    wait_for(
        "the first CRD Established",
        lambda: cluster.crd(first),
        lambda crd: check_crd(first, crd).status is Status.OK,
        timeout=30,
    )
    extensions.create_custom_resource_definition(as_body(_crd(crd_group, "betas", "Alpha")))
    live = wait_for(
        "the API server to judge the second CRD's names",
        lambda: cluster.crd(taken),
        lambda crd: crd is not None and "NamesAccepted" in str(crd.get("status")),
        timeout=30,
    )
    found = check_crd(taken, live)
    assert found.status is Status.FAIL
    assert found.message == 'its names are not accepted: KindConflict: "Alpha" is already in use'
    assert f"grep {crd_group}" in found.fix
    missing = f"gammas.{crd_group}"
    assert check_crd(missing, cluster.crd(missing)).message.startswith("not installed")


def _unreadable_hpa(api: client.ApiClient, namespace: str, name: str) -> dict[str, Any]:
    """A model's HPA as Shoal renders it, and the Deployment it scales, with no series
    behind its metrics: the HPA controller cannot read them."""
    body = inference_model(name, "pool")
    body["metadata"]["namespace"] = namespace
    model = InferenceModel.model_validate(body)
    pool = TenantPool.model_validate(shared_pool("pool", [namespace])).spec
    hpa = horizontal_autoscaler(model, effective_batching(model, None), pool)
    selector = {"shoal.dev/model": name}
    client.AppsV1Api(api).create_namespaced_deployment(
        namespace,
        as_body(
            {
                "metadata": {"name": name, "labels": hpa["metadata"]["labels"]},
                "spec": {
                    "replicas": 1,
                    "selector": {"matchLabels": selector},
                    "template": {
                        "metadata": {"labels": selector},
                        "spec": {
                            "containers": [{"name": "triton", "image": "triton.invalid/none"}]
                        },
                    },
                },
            }
        ),
    )
    client.AutoscalingV2Api(api).create_namespaced_horizontal_pod_autoscaler(
        namespace, as_body(hpa)
    )
    return hpa


def test_an_hpa_that_cannot_read_its_metrics_is_listed_with_its_own_message(
    api: client.ApiClient, crds: list[str], kube_target: Target, namespace: str
) -> None:
    _unreadable_hpa(api, namespace, "unread")
    autoscaling = client.AutoscalingV2Api(api)
    hpa = wait_for(
        "the HPA controller to report its metric unreadable",
        lambda: autoscaling.read_namespaced_horizontal_pod_autoscaler("unread", namespace),
        lambda h: any(c.type == "ScalingActive" for c in h.status.conditions or []),
        timeout=30,
    )
    active = next(c for c in hpa.status.conditions if c.type == "ScalingActive")
    assert (active.status, active.reason) == ("False", "FailedGetPodsMetric")
    status, found = doctor(kube_target, "autoscalers", f"--namespace={namespace}")
    assert status == 1
    reported = found[f"HPA {namespace}/unread"]
    assert reported["status"] == Status.FAIL
    assert reported["message"] == f"ScalingActive=False FailedGetPodsMetric: {active.message}"
    assert f"kubectl -n {namespace} describe hpa unread" in reported["fix"]


def test_a_cluster_without_a_custom_metrics_api_is_reported(
    api: client.ApiClient, crds: list[str], kube_target: Target
) -> None:
    registered = [
        s.metadata.name
        for s in client.ApiregistrationV1Api(api).list_api_service().items
        if s.spec and s.spec.group == CUSTOM_METRICS
    ]
    if registered:
        pytest.skip(f"a metrics adapter is registered ({registered}, an e2e run's): no fault")
    status, found = doctor(kube_target, "metrics-api")
    assert status == 1
    missing = found[CUSTOM_METRICS]
    assert (missing["status"], missing["message"]) == (
        Status.FAIL,
        "no APIService serves it: the HPAs cannot read Shoal's metrics",
    )
    assert "prometheus-adapter-config.yaml" in missing["fix"]


def test_an_operator_that_cannot_run_or_lead_is_reported(
    api: client.ApiClient, crds: list[str], kube_target: Target, namespace: str
) -> None:
    """An operator Deployment (the chart's labels) whose pod fits no node, and a Lease
    its last leader stopped renewing a minute ago, in the test's namespace."""
    labels = dict(pair.split("=") for pair in OPERATOR_SELECTOR.split(","))
    client.AppsV1Api(api).create_namespaced_deployment(
        namespace,
        as_body(
            {
                "metadata": {"name": "shoal-operator", "labels": labels},
                "spec": {
                    "replicas": 1,
                    "selector": {"matchLabels": labels},
                    "template": {
                        "metadata": {"labels": labels},
                        "spec": {
                            "nodeSelector": {"shoal.dev/doctor-test": "no-such-node"},
                            "containers": [{"name": "operator", "image": "operator.invalid/none"}],
                        },
                    },
                },
            }
        ),
    )
    renewed = dt.datetime.now(dt.UTC) - dt.timedelta(seconds=60)
    client.CoordinationV1Api(api).create_namespaced_lease(
        namespace,
        as_body(
            {
                "metadata": {"name": LEASE_NAME},
                "spec": {
                    "holderIdentity": "shoal-operator-gone",
                    "leaseDurationSeconds": 15,
                    "renewTime": renewed.strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
                },
            }
        ),
    )
    wait_for(
        "the Deployment controller to judge availability",
        lambda: client.AppsV1Api(api).read_namespaced_deployment("shoal-operator", namespace),
        lambda d: any(c.type == "Available" for c in d.status.conditions or []),
        timeout=30,
    )
    status, found = doctor(kube_target, "operator")
    assert status == 1
    deployment = found[f"Deployment {namespace}/shoal-operator"]
    assert deployment["status"] == Status.FAIL
    assert deployment["message"].startswith("0/1 replicas available (MinimumReplicasUnavailable")
    assert f"kubectl -n {namespace} describe deployment shoal-operator" in deployment["fix"]
    lease = found[f"Lease {namespace}/{LEASE_NAME}"]
    assert lease["status"] == Status.FAIL
    assert re.match(r"shoal-operator-gone last renewed it \d+s ago", lease["message"]), lease


def test_the_doctor_reads_with_the_operators_client(api: client.ApiClient, crds: list[str]) -> None:
    """Control for the tests above: the probe's reads find what exists (Shoal's own
    CRD), so a 'not installed' above is the API server's answer, not a wrong path."""
    live = Cluster(Kube(api)).crd(CRD_NAMES[0])
    assert live is not None
    assert check_crd(CRD_NAMES[0], live).status is Status.OK


def test_gpu_nodes_and_their_products_are_checked_against_the_pools(
    api: client.ApiClient,
    crds: list[str],
    kube_target: Target,
    gpu_nodes: list[client.V1Node],
    namespace: str,
) -> None:
    """The simulated GPU nodes advertise nvidia.com/gpu and carry GPU Feature
    Discovery's product label, as the device plugin and GFD would: ok. A pool that places
    its models on a product no node carries fails, named; once it is gone, ok again."""
    status, found = doctor(kube_target, "gpus")
    assert status == 0, found
    nodes = found["nvidia.com/gpu on nodes"]
    assert nodes["status"] == Status.OK
    assert f"{len(gpu_nodes)} nodes advertise" in nodes["message"]
    shoal = Shoal(api)
    name = f"pool-{uuid.uuid4().hex[:8]}"
    doc = shared_pool(name, [namespace])
    doc["spec"]["placement"]["gpuProduct"] = "NVIDIA-B200"
    shoal.create(doc)
    try:
        status, found = doctor(kube_target, "gpus")
        assert status == 1
        missing = found["nvidia.com/gpu.product=NVIDIA-B200"]
        assert missing["status"] == Status.FAIL
        assert name in missing["message"]
        assert "NVIDIA-H100" in missing["message"]  # the products the nodes do carry
    finally:
        shoal.delete("TenantPool", name)
    status, found = doctor(kube_target, "gpus")
    assert "nvidia.com/gpu.product=NVIDIA-B200" not in found
