"""The operator as ``helm install`` runs it, on real-0: the chart's Deployment with the
image built from the project's Dockerfile, two replicas Ready in a namespace that
enforces the restricted Pod Security profile, reaching the API server through the
``kubernetes`` Service as its own ServiceAccount with the chart's RBAC. One leads; its
pod deleted, the other takes over and a new model converges; its process hung, the
liveness probe fails, the kubelet restarts it, and the other replica leads.
What stands in: the image's Python base (e2e/cluster/image_builds.py). The session's
own operator process is paused throughout, so the chart's replicas do all the work.
"""

from __future__ import annotations

import json
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from e2e.operator import OperatorProcess, paused
from kubernetes import client

from shoal.leader import LEASE_NAME
from tests.conftest import RealNode
from tests.realnode.conftest import container_status, pod_ready, signal_container
from tests.support.shoal_objects import Shoal, inference_model, wait_ready
from tests.support.wait import wait_for

CHART = Path(__file__).resolve().parents[2] / "charts" / "shoal"
RELEASE = "shoal-real"
Helm = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture
def release(
    helm: Helm, core: client.CoreV1Api, real_node: RealNode, shoal_images: dict[str, str]
) -> Iterator[str]:
    """The chart installed on real-0 into a namespace enforcing the restricted profile;
    yields the namespace. Its own gateway namespace keeps it apart from the other
    tiers' objects, and the admission policy stays the kustomized copy the session
    installed (the cluster tier installs the chart's)."""
    namespace = f"shoal-real-{uuid.uuid4().hex[:5]}"
    restricted = {
        f"pod-security.kubernetes.io/{mode}": "restricted" for mode in ("enforce", "warn", "audit")
    }
    core.create_namespace(
        client.V1Namespace(metadata=client.V1ObjectMeta(name=namespace, labels=restricted))
    )
    placement = real_node.placement()
    install = helm(
        "install",
        RELEASE,
        str(CHART),
        *("--namespace", namespace),
        *("--set", f"gateway.namespace={namespace}-gateways"),
        *("--set", "admissionPolicy.enabled=false"),
        *("--set-json", f"nodeSelector={json.dumps(placement['nodeSelector'])}"),
        *("--set-json", f"tolerations={json.dumps(placement['tolerations'])}"),
        *("--wait", "--timeout", "180s"),
    )
    try:
        assert install.returncode == 0, install.stdout + install.stderr
        yield namespace
    finally:
        # The chart's gateway namespace goes with the release.
        helm("uninstall", RELEASE, "--namespace", namespace, "--wait", "--timeout", "120s")
        core.delete_namespace(namespace)


def _pods(core: client.CoreV1Api, namespace: str) -> list[client.V1Pod]:
    selector = f"app.kubernetes.io/instance={RELEASE},app.kubernetes.io/component=operator"
    pods = core.list_namespaced_pod(namespace, label_selector=selector).items
    return [p for p in pods if p.metadata.deletion_timestamp is None]


def _holder(api: client.ApiClient, namespace: str) -> str:
    """The pod holding the leader Lease (an identity is ``<hostname>_<pid>``)."""
    try:
        lease = client.CoordinationV1Api(api).read_namespaced_lease(LEASE_NAME, namespace)
    except client.ApiException as exc:
        if exc.status == 404:
            return ""
        raise
    return str(lease.spec.holder_identity or "").rsplit("_", 1)[0]


def _events(core: client.CoreV1Api, namespace: str, pod: str) -> list[client.CoreV1Event]:
    selector = f"involvedObject.name={pod}"
    return list(core.list_namespaced_event(namespace, field_selector=selector).items)


def test_the_charts_operator_leads_hands_over_and_is_restarted_when_hung(
    api: client.ApiClient,
    core: client.CoreV1Api,
    operator: OperatorProcess,
    namespace: str,
    real_node: RealNode,
    release: str,
) -> None:
    shoal = Shoal(api)
    with paused(operator), shoal.pool([namespace]) as pool:
        pods = wait_for(
            "two operator pods Ready on real-0",
            lambda: _pods(core, release),
            lambda ps: len(ps) == 2 and all(pod_ready(p) for p in ps),
            timeout=120,
        )
        assert {p.spec.node_name for p in pods} == {real_node.name}
        for pod in pods:
            assert container_status(pod, "operator").restart_count == 0
        names = {str(p.metadata.name) for p in pods}
        first = wait_for("one replica to lead", lambda: _holder(api, release), lambda h: h in names)

        # The leader's pod deleted: it releases the Lease on its way out, and a replica
        # that is still up (the follower, or the Deployment's replacement if it starts
        # first) leads and serves a model created after it.
        deleted = time.monotonic()
        core.delete_namespaced_pod(first, release)
        second = wait_for(
            "another replica to lead", lambda: _holder(api, release), lambda h: h not in ("", first)
        )
        handover_s = time.monotonic() - deleted
        shoal.create(inference_model("after-handover", pool), namespace)
        wait_ready(shoal, namespace, "after-handover")

        # The new leader hung (its process stopped): its Lease runs out and the other
        # replica leads; the liveness probe fails and the kubelet kills the container
        # and starts it again.
        live = wait_for(
            "two replicas Ready again",
            lambda: _pods(core, release),
            lambda ps: len(ps) == 2 and all(pod_ready(p) for p in ps),
            timeout=120,
        )
        (third,) = {str(p.metadata.name) for p in live} - {second}
        hung = core.read_namespaced_pod(second, release)
        signal_container(real_node, hung, "operator", "SIGSTOP")
        stopped = time.monotonic()
        wait_for(
            "the other replica to lead",
            lambda: _holder(api, release),
            lambda h: h == third,
            timeout=60,
        )
        takeover_s = time.monotonic() - stopped
        shoal.create(inference_model("after-hang", pool), namespace)
        wait_ready(shoal, namespace, "after-hang")
        killing = wait_for(
            "the kubelet to kill the hung container",
            lambda: _events(core, release, second),
            lambda es: any(e.reason == "Killing" and "liveness" in (e.message or "") for e in es),
            # The chart's probe: every 20 s, 3 failures.
            timeout=120,
        )
        # Resumed, the process takes the kubelet's SIGTERM at once rather than at the end
        # of the 30 s grace period; the restart is the kubelet's either way.
        signal_container(real_node, hung, "operator", "SIGCONT")
        restarted = wait_for(
            "the hung container restarted and Ready",
            lambda: core.read_namespaced_pod(second, release),
            lambda p: container_status(p, "operator").restart_count == 1 and pod_ready(p),
            timeout=120,
        )
        assert any(e.reason == "Unhealthy" and "Liveness" in (e.message or "") for e in killing)
        assert container_status(restarted, "operator").ready
        assert _holder(api, release) == third
        print(
            f"handover after the leader's pod was deleted: {handover_s:.1f} s; "
            f"takeover from a hung leader: {takeover_s:.1f} s"
        )
        for name in ("after-handover", "after-hang"):
            shoal.delete("InferenceModel", name, namespace)
