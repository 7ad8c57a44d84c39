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
import re
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
from e2e.gateway_pods import service_account_token
from e2e.install import Kubectl
from e2e.linear_model import BODY
from e2e.operator import OperatorProcess, paused
from kubernetes import client
from kubernetes.utils import create_from_dict

from shoal.leader import LEASE_NAME
from shoal.render.gateway import audience, gateway_name
from shoal.render.names import SERVING_CONTAINER
from tests.conftest import RealNode
from tests.realnode.conftest import (
    LOAD_SCRIPT,
    claim_of_model,
    container_status,
    load_tally,
    model_on_real_node,
    model_pods,
    pod_ready,
    signal_container,
    tenant_pod,
)
from tests.support.shoal_objects import Shoal, condition, inference_model, wait_ready
from tests.support.wait import wait_for

CHART = Path(__file__).resolve().parents[2] / "charts" / "shoal"
RELEASE = "shoal-real"
PROBE_PERIOD_S = 10
Helm = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture(scope="module")
def release(
    helm: Helm, core: client.CoreV1Api, real_node: RealNode, shoal_images: dict[str, str]
) -> Iterator[str]:
    """The chart installed on real-0 into a namespace enforcing the restricted profile,
    the pools' gateways placed on real-0 too; yields the namespace. Its own gateway
    namespace keeps it apart from the other tiers' objects, and the admission policy
    stays the kustomized copy the session installed (the cluster tier installs the
    chart's). This module's tests share it; the last one uninstalls and reinstalls it."""
    namespace = f"shoal-real-{uuid.uuid4().hex[:5]}"
    restricted = {
        f"pod-security.kubernetes.io/{mode}": "restricted" for mode in ("enforce", "warn", "audit")
    }
    core.create_namespace(
        client.V1Namespace(metadata=client.V1ObjectMeta(name=namespace, labels=restricted))
    )
    install = install_release(helm, real_node, namespace)
    try:
        assert install.returncode == 0, install.stdout + install.stderr
        yield namespace
    finally:
        helm("uninstall", RELEASE, "--namespace", namespace, "--wait", "--timeout", "120s")
        # The gateways' namespace outlives the release (docs/operations.md, Uninstall).
        core.delete_namespace(gateways_of(namespace))
        core.delete_namespace(namespace)


def gateways_of(namespace: str) -> str:
    return f"{namespace}-gateways"


def install_release(
    helm: Helm, real_node: RealNode, namespace: str
) -> subprocess.CompletedProcess[str]:
    placement = real_node.placement()
    return helm(
        "install",
        RELEASE,
        str(CHART),
        *("--namespace", namespace),
        *("--set", f"gateway.namespace={gateways_of(namespace)}"),
        *("--set", "admissionPolicy.enabled=false"),
        # Half the default period: a hung replica is killed 20-30 s after it stops (not
        # 40-60 s), still after the Lease (15 s) has passed to the other replica.
        *("--set", f"livenessProbe.periodSeconds={PROBE_PERIOD_S}"),
        *("--set-json", f"nodeSelector={json.dumps(placement['nodeSelector'])}"),
        *("--set-json", f"tolerations={json.dumps(placement['tolerations'])}"),
        *("--set-json", f"gateway.nodeSelector={json.dumps(placement['nodeSelector'])}"),
        *("--set-json", f"gateway.tolerations={json.dumps(placement['tolerations'])}"),
        *("--wait", "--timeout", "180s"),
    )


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
    # No gateway: its two default replicas would take a core of real-0's two, where the
    # chart places gateways, for nothing this test looks at.
    with paused(operator), shoal.pool([namespace], gateway=False) as pool:
        pods = wait_for(
            "two operator pods Ready on real-0",
            lambda: _pods(core, release),
            lambda ps: len(ps) == 2 and all(pod_ready(p) for p in ps),
            timeout=120,
        )
        assert {p.spec.node_name for p in pods} == {real_node.name}
        for pod in pods:
            assert container_status(pod, "operator").restart_count == 0
            [container] = pod.spec.containers
            assert container.liveness_probe.period_seconds == PROBE_PERIOD_S
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
            # The probe as installed: every PROBE_PERIOD_S, 3 failures.
            timeout=90,
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


def test_uninstalling_the_chart_leaves_every_tenant_serving(
    api: client.ApiClient,
    core: client.CoreV1Api,
    helm: Helm,
    operator: OperatorProcess,
    namespace: str,
    real_node: RealNode,
    release: str,
    shoal_images: dict[str, str],
    tmp_path: Path,
    kubectl: Kubectl,
) -> None:
    """`helm uninstall` while a tenant's pod sends through its pool's gateway to a model,
    all of them pods on real-0 that the chart's operator made: not one request fails,
    the model's and the gateway's pods are the same pods, the gateways' namespace and
    every custom resource stay. Installed again under the same name, the chart adopts
    what it kept and its operator takes the pool's next change to the same gateway.

    The model carries its owner's pod overrides, which the real kubelet runs: its pod
    labels, variables from a ConfigMap's key and from all its keys, a tritonserver flag,
    the ConfigMap mounted read-only and scratch space mounted writable."""
    shoal = Shoal(api)
    gateways = gateways_of(release)
    core.create_namespaced_config_map(
        namespace,
        client.V1ConfigMap(
            metadata=client.V1ObjectMeta(name="model-extras"),
            data={"greeting": "hello from a ConfigMap", "level": "2"},
        ),
    )
    with (
        paused(operator),
        claim_of_model(api, core, namespace, tmp_path) as (claim, _),
        model_on_real_node(
            api,
            namespace,
            real_node,
            f"pvc://{claim}/linear",
            gateway=True,
            runtime=POD_OVERRIDES,
        ) as pool,
    ):
        wait_ready(shoal, namespace, "linear", timeout=240)
        [served] = model_pods(core, namespace)
        assert (served.metadata.labels or {}).get("example.com/team") == "search"
        assert (served.metadata.annotations or {}).get("example.com/cost-center") == "42"

        def run(*argv: str, check: bool = True) -> str:
            exec_ = ("exec", "-n", namespace, str(served.metadata.name), "-c", SERVING_CONTAINER)
            return kubectl(*exec_, "--", *argv, check=check)

        assert run("printenv", "MODEL_LEVEL", "EXTRA_greeting").splitlines() == [
            "2",
            "hello from a ConfigMap",
        ]
        assert run("cat", "/etc/shoal-extras/greeting") == "hello from a ConfigMap"
        run("touch", "/scratch/written")
        refused = run("touch", "/etc/shoal-extras/written", check=False)
        assert "Read-only file system" in refused, refused
        assert "--log-verbose=1" in run("cat", "/proc/1/cmdline").split("\0")
        [gateway] = wait_for(
            "the pool's gateway pod Ready",
            lambda: _gateway_pods(core, gateways, pool),
            lambda ps: len(ps) == 1 and pod_ready(ps[0]),
            timeout=180,
        )
        [model] = model_pods(core, namespace)
        service = core.read_namespaced_service(gateway_name(pool), gateways)
        url = f"http://{service.spec.cluster_ip}:8000"
        # The gateway routes to the replica once its agent has reloaded with it.
        token = service_account_token(core, namespace, audience(pool))
        wait_for(
            "the gateway to route to the model",
            lambda: (
                httpx.post(
                    f"{url}/v2/models/linear/infer",
                    json=BODY,
                    headers={"Authorization": f"Bearer {token}"},
                    timeout=10,
                ).status_code
            ),
            lambda code: code == 200,
            timeout=60,
        )
        load = tenant_pod(
            real_node,
            shoal_images["operator"],
            url,
            pool,
            name="tenant-load",
            script=LOAD_SCRIPT,
            env={"REQUESTS": "2000", "SECONDS": "15", "THREADS": "4"},
        )
        create_from_dict(api, load, namespace=namespace)
        wait_for(
            "the load to be answered",
            lambda: str(core.read_namespaced_pod_log("tenant-load", namespace)),
            lambda log: load_tally(log)["outcomes"] != {},
            timeout=90,
        )

        uninstall = helm("uninstall", RELEASE, "--namespace", release, "--wait")
        assert uninstall.returncode == 0, uninstall.stdout + uninstall.stderr
        wait_for("the operator's pods gone", lambda: _pods(core, release), lambda ps: not ps)
        assert core.read_namespaced_pod("tenant-load", namespace).status.phase == "Running", (
            "the load ended before the uninstall: it was not made under load"
        )
        finished = wait_for(
            "the load to finish",
            lambda: core.read_namespaced_pod("tenant-load", namespace),
            lambda p: str(p.status.phase) in ("Succeeded", "Failed"),
            timeout=180,
        )
        log = str(core.read_namespaced_pod_log("tenant-load", namespace))
        assert finished.status.phase == "Succeeded", log
        tally = load_tally(log)
        print(f"across helm uninstall: {tally}")
        assert tally["outcomes"] == {"200": sum(tally["outcomes"].values())}, tally
        assert [p.metadata.uid for p in _gateway_pods(core, gateways, pool)] == [
            gateway.metadata.uid
        ]
        assert [p.metadata.uid for p in model_pods(core, namespace)] == [model.metadata.uid]
        assert core.read_namespace(gateways).status.phase == "Active"
        assert shoal.get("TenantPool", pool)["metadata"].get("deletionTimestamp") is None
        assert condition(shoal.get("InferenceModel", "linear", namespace), "Ready")["status"] == (
            "True"
        )

        cap = re.compile(r"maxconn 3\b")
        config = core.read_namespaced_config_map(gateway_name(pool), gateways).data or {}
        assert not cap.search(config["haproxy.cfg"])
        again = install_release(helm, real_node, release)
        assert again.returncode == 0, again.stdout + again.stderr
        shoal.patch("TenantPool", pool, {"spec": {"gateway": {"limits": {"concurrency": 3}}}})
        wait_for(
            "the reinstalled operator to take the pool's change to its gateway",
            lambda: core.read_namespaced_config_map(gateway_name(pool), gateways),
            lambda cm: cap.search((cm.data or {}).get("haproxy.cfg", "")) is not None,
            timeout=90,
        )
        assert [p.metadata.uid for p in model_pods(core, namespace)] == [model.metadata.uid]
        core.delete_namespaced_pod("tenant-load", namespace)


POD_OVERRIDES = {
    "podLabels": {"example.com/team": "search"},
    "podAnnotations": {"example.com/cost-center": "42"},
    "env": [
        {
            "name": "MODEL_LEVEL",
            "valueFrom": {"configMapKeyRef": {"name": "model-extras", "key": "level"}},
        }
    ],
    "envFrom": [{"configMapRef": {"name": "model-extras"}, "prefix": "EXTRA_"}],
    "extraArgs": ["--log-verbose=1"],
    "volumes": [
        {"name": "extras", "mountPath": "/etc/shoal-extras", "configMap": {"name": "model-extras"}},
        {"name": "scratch", "mountPath": "/scratch", "emptyDir": {"sizeLimit": "64Mi"}},
    ],
}


def _gateway_pods(core: client.CoreV1Api, namespace: str, pool: str) -> list[client.V1Pod]:
    selector = f"app.kubernetes.io/instance={gateway_name(pool)}"
    pods = core.list_namespaced_pod(namespace, label_selector=selector).items
    return [p for p in pods if p.metadata.deletion_timestamp is None]
