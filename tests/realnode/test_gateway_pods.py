"""A pool's gateway as the operator renders it, run for real on real-0: the agent's init
container writes HAProxy's first configuration from the ConfigMap, haproxy (Debian's
2.6.12 in a stand-in of the official image) serves with its master socket, the agent
sidecar (the operator's own image, built from the Dockerfile) watches the ConfigMap. A
tenant's pod calls its model through the gateway's Service with the token its
projected volume holds, and the model's replica, itself a real pod, answers. The
tenant's cap changed twice under a steady load of 10,000 requests or more: each change
reaches HAProxy by a reload and none of the requests fails. The agent killed, the
kubelet restarts it and the next change of the pool still reaches HAProxy.
What stands in: the images (built here, e2e/cluster/image_builds.py).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from e2e.operator import OperatorProcess
from kubernetes import client
from kubernetes.utils import create_from_dict

from shoal.gateway.agent import digest
from shoal.render.gateway import DEFAULT_GATEWAY_NAMESPACE, gateway_name
from tests.conftest import RealNode
from tests.realnode.conftest import (
    LOAD_SCRIPT,
    container_status,
    gateway_pods,
    load_tally,
    model_on_real_node,
    signal_container,
    tenant_pod,
)
from tests.support.shoal_objects import Shoal, condition, wait_ready
from tests.support.wait import wait_for

# The tenant's client: python and httpx from the operator's image. It tries until a
# request with its token is answered (the gateway learns the replica within seconds),
# then sends one without a token, and prints both answers as JSON.
CLIENT = """
import json, os, sys, time, httpx
url = os.environ["GATEWAY"] + "/v2/models/linear/infer"
body = json.loads(os.environ["BODY"])
token = open(os.environ["TOKEN"]).read().strip()
deadline = time.monotonic() + 90
while True:
    try:
        mine = httpx.post(url, json=body, headers={"Authorization": "Bearer " + token}, timeout=5)
        if mine.status_code == 200 or time.monotonic() > deadline:
            break
    except httpx.HTTPError as exc:
        print("waiting:", exc, file=sys.stderr)
        if time.monotonic() > deadline:
            raise
    time.sleep(1)
none = httpx.post(url, json=body, timeout=5)
answer = mine.json() if mine.status_code == 200 else mine.text
print(json.dumps({"token": [mine.status_code, answer], "none": [none.status_code, none.text]}))
"""

LOAD_REQUESTS = 10_000


def test_a_tenant_pod_calls_its_model_through_the_gateway_pods(
    api: client.ApiClient,
    core: client.CoreV1Api,
    operator: OperatorProcess,
    namespace: str,
    real_node: RealNode,
    shoal_images: dict[str, str],
    model_claim: tuple[str, Path],
) -> None:
    shoal = Shoal(api)
    claim, _ = model_claim
    with model_on_real_node(
        api, namespace, real_node, f"pvc://{claim}/linear", gateway=True
    ) as pool:
        wait_ready(shoal, namespace, "linear", timeout=240)
        status = wait_for(
            "the pool's gateway pod Ready",
            lambda: shoal.get("TenantPool", pool).get("status") or {},
            lambda s: (s.get("gateway") or {}).get("readyReplicas") == 1,
            timeout=180,
        )
        assert condition({"status": status}, "GatewayReady")["status"] == "True"
        [pod] = gateway_pods(core, pool)
        assert pod.spec.node_name == real_node.name
        images = sorted(str(c.image) for c in pod.spec.containers)
        assert images == sorted([shoal_images["haproxy"], shoal_images["operator"]])
        assert all(c.ready for c in pod.status.container_statuses)
        assert all(c.restart_count == 0 for c in pod.status.container_statuses)

        service = core.read_namespaced_service(gateway_name(pool), DEFAULT_GATEWAY_NAMESPACE)
        url = f"http://{service.spec.cluster_ip}:8000"
        create_from_dict(
            api,
            tenant_pod(
                real_node,
                shoal_images["operator"],
                url,
                pool,
                name="tenant-client",
                script=CLIENT,
            ),
            namespace=namespace,
        )
        done = wait_for(
            "the tenant's client pod to finish",
            lambda: core.read_namespaced_pod("tenant-client", namespace),
            lambda p: str(p.status.phase) in ("Succeeded", "Failed"),
            timeout=150,
        )
        log = core.read_namespaced_pod_log("tenant-client", namespace)
        assert done.status.phase == "Succeeded", log
        answers = json.loads(log.strip().splitlines()[-1])
        status_code, reply = answers["token"]
        assert status_code == 200, reply
        assert reply["outputs"][0]["data"] == [0, 1, 2, 3]
        assert answers["none"][0] == 401, answers["none"]

        # The tenant's cap changed twice while it sends steadily: each change reaches
        # HAProxy through the ConfigMap and a reload, and not one request fails.
        gateway_pod = str(pod.metadata.name)
        load_env = {"REQUESTS": str(LOAD_REQUESTS), "SECONDS": "30", "THREADS": "6"}
        load_pod = tenant_pod(
            real_node,
            shoal_images["operator"],
            url,
            pool,
            name="tenant-load",
            script=LOAD_SCRIPT,
            env=load_env,
        )
        create_from_dict(api, load_pod, namespace=namespace)
        wait_for(
            "the load to be answered",
            lambda: _log(core, "tenant-load", namespace),
            lambda log: load_tally(log)["outcomes"] != {},
            timeout=90,
        )
        for cap in (5, 9):
            _change_cap(shoal, core, pool, gateway_pod, cap)
        assert core.read_namespaced_pod("tenant-load", namespace).status.phase == "Running", (
            "the load ended before the changes were applied: they were not made under load"
        )
        finished = wait_for(
            "the load to finish",
            lambda: core.read_namespaced_pod("tenant-load", namespace),
            lambda p: str(p.status.phase) in ("Succeeded", "Failed"),
            timeout=240,
        )
        log = _log(core, "tenant-load", namespace)
        assert finished.status.phase == "Succeeded", log
        load = load_tally(log)
        print(f"under two reloads: {load}")
        assert sum(load["outcomes"].values()) >= LOAD_REQUESTS, load
        assert load["outcomes"] == {"200": sum(load["outcomes"].values())}, load

        # The agent killed: the kubelet restarts it, and the next change still lands.
        signal_container(real_node, pod, "agent", "SIGKILL")
        restarted = wait_for(
            "the kubelet to restart the agent",
            lambda: core.read_namespaced_pod(gateway_pod, DEFAULT_GATEWAY_NAMESPACE),
            lambda p: (
                container_status(p, "agent").restart_count == 1
                and container_status(p, "agent").ready
            ),
            timeout=90,
        )
        assert container_status(restarted, "haproxy").restart_count == 0
        _change_cap(shoal, core, pool, gateway_pod, 7)


def _log(core: client.CoreV1Api, pod: str, namespace: str, container: str | None = None) -> str:
    if container is None:
        return str(core.read_namespaced_pod_log(pod, namespace))
    return str(core.read_namespaced_pod_log(pod, namespace, container=container))


def _change_cap(
    shoal: Shoal, core: client.CoreV1Api, pool: str, gateway_pod: str, cap: int
) -> None:
    """Set the pool's concurrency cap; return once the gateway's agent says it applied
    the configuration that carries it."""
    shoal.patch("TenantPool", pool, {"spec": {"gateway": {"limits": {"concurrency": cap}}}})
    config_map = wait_for(
        f"concurrency {cap} in the gateway's ConfigMap",
        lambda: core.read_namespaced_config_map(gateway_name(pool), DEFAULT_GATEWAY_NAMESPACE),
        # The tenant's share of the cap is the gate server's maxconn (one replica).
        lambda cm: (
            re.search(rf"maxconn {cap}\b", (cm.data or {}).get("haproxy.cfg", "")) is not None
        ),
        timeout=60,
    )
    applied = f"gateway configuration {digest(config_map.data or {})[:12]} applied"
    wait_for(
        "the agent to apply it",
        lambda: _log(core, gateway_pod, DEFAULT_GATEWAY_NAMESPACE, "agent"),
        lambda log: applied in log,
        timeout=90,
    )
