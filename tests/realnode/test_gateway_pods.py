"""A pool's gateway as the operator renders it, run for real on real-0: the agent's init
container writes HAProxy's first configuration from the ConfigMap, haproxy (Debian's
2.6.12 in a stand-in of the official image) serves with its master socket, the agent
sidecar (the operator's own image, built from the Dockerfile) watches the ConfigMap. A
tenant's pod calls its model through the gateway's Service with the token its
projected volume holds, and the model's replica, itself a real pod, answers; tokens for
another audience, forged ones, another tenant's and a stranger's are refused. The
tenant's cap changed twice under a steady load of 10,000 requests or more: each change
reaches HAProxy by a reload and none of the requests fails. The agent killed, the
kubelet restarts it and the next change of the pool still reaches HAProxy. And the
pool's NetworkPolicies hold in the kernel (kube-router enforcing them on real-0).
What stands in: the images (built here, e2e/cluster/image_builds.py).
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterator

import httpx
import pytest
from e2e.cluster import netpol
from e2e.gateway_pods import service_account_token
from e2e.install import Kubectl
from e2e.linear_model import BODY
from e2e.operator import OperatorProcess
from kubernetes import client
from kubernetes.utils import create_from_dict

from shoal.gateway.agent import digest
from shoal.render.gateway import DEFAULT_GATEWAY_NAMESPACE, audience, gateway_name
from shoal.render.names import SERVING_CONTAINER
from tests.conftest import RealNode, fresh_namespace
from tests.realnode.conftest import (
    LOAD_SCRIPT,
    claim_of_model,
    container_status,
    gateway_pods,
    load_tally,
    model_on_real_node,
    model_pods,
    restricted_pod,
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


@pytest.fixture(scope="module")
def served_pool(
    api: client.ApiClient,
    operator: OperatorProcess,
    module_namespace: str,
    real_node: RealNode,
    shoal_images: dict[str, str],
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[str]:
    """The linear model, from a claim, in a pool on real-0 with one gateway replica,
    both Ready; this module's tests share it (each would otherwise wait for its own).
    Yields the pool's name."""
    core = client.CoreV1Api(api)
    shoal = Shoal(api)
    directory = tmp_path_factory.mktemp("model")
    neighbour = fresh_namespace(core, "neighbour")
    with (
        claim_of_model(api, core, module_namespace, directory) as (claim, _),
        model_on_real_node(
            api,
            module_namespace,
            real_node,
            f"pvc://{claim}/linear",
            gateway=True,
            other_tenants=(neighbour,),
        ) as pool,
    ):
        wait_ready(shoal, module_namespace, "linear", timeout=240)
        wait_for(
            "the pool's gateway pod Ready",
            lambda: (shoal.get("TenantPool", pool).get("status") or {}).get("gateway") or {},
            lambda g: g.get("readyReplicas") == 1,
            timeout=180,
        )
        yield pool
    core.delete_namespace(neighbour)


def _infer(url: str, bearer: str | None, **headers: str) -> httpx.Response:
    sent = dict(headers)
    if bearer is not None:
        sent["Authorization"] = f"Bearer {bearer}"
    return httpx.post(f"{url}/v2/models/linear/infer", json=BODY, headers=sent, timeout=10)


def test_a_tenant_pod_calls_its_model_through_the_gateway_pods(
    api: client.ApiClient,
    core: client.CoreV1Api,
    module_namespace: str,
    real_node: RealNode,
    shoal_images: dict[str, str],
    served_pool: str,
) -> None:
    shoal = Shoal(api)
    namespace, pool = module_namespace, served_pool
    status = shoal.get("TenantPool", pool).get("status") or {}
    assert condition({"status": status}, "GatewayReady")["status"] == "True"
    assert status["gateway"]["audience"] == audience(pool)
    model = shoal.get("InferenceModel", "linear", namespace)
    host = f"{gateway_name(pool)}.{DEFAULT_GATEWAY_NAMESPACE}.svc"
    assert model["status"]["endpoints"]["gateway"] == f"http://{host}:8000/v2/models/linear"
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

    # Who calls is proven, not claimed: tokens the API server issues, sent to the
    # gateway's Service from this machine (the node's own network, kube-proxy's rules).
    aud = audience(pool)
    mine = service_account_token(core, namespace, aud)
    reply = _infer(url, mine, **{"X-Request-ID": "req-42"})
    assert reply.status_code == 200, reply.text
    assert reply.headers["X-Request-ID"] == "req-42"
    assert (
        _infer(url, service_account_token(core, namespace, "another-audience")).status_code == 401
    )
    forged = mine[:-8] + ("AAAAAAAA" if not mine.endswith("AAAAAAAA") else "BBBBBBBB")
    assert _infer(url, forged).status_code == 401
    # A claimed tenant changes nothing: the token's namespace is the tenant.
    neighbour = next(
        n for n in shoal.get("TenantPool", pool)["spec"]["tenants"]["namespaces"] if n != namespace
    )
    assert _infer(url, mine, **{"X-Shoal-Tenant": neighbour}).status_code == 200
    # Another tenant of the same pool reaches only its own models; a namespace the pool
    # does not admit is refused at the door.
    assert _infer(url, service_account_token(core, neighbour, aud)).status_code == 404
    assert _infer(url, service_account_token(core, "default", aud)).status_code == 403

    # The tenant's cap changed twice while it sends steadily: each change reaches
    # HAProxy through the ConfigMap and a reload, and not one request fails.
    gateway_pod = str(pod.metadata.name)
    load_env = {"REQUESTS": str(LOAD_REQUESTS), "SECONDS": "20", "THREADS": "6"}
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
            container_status(p, "agent").restart_count == 1 and container_status(p, "agent").ready
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


# Connects to each URL (3 s at most) and prints what came back: a status code, or the
# error's name when no connection was made. (The gateway answers its health path
# without a token: a 200 from it says the connection was let through.)
PROBE = """
import json, sys, httpx
seen = {}
for url in sys.argv[1:]:
    try:
        seen[url] = str(httpx.get(url, timeout=3).status_code)
    except httpx.HTTPError as exc:
        seen[url] = type(exc).__name__
print(json.dumps(seen))
"""
REFUSED = {"ConnectError", "ConnectTimeout"}
# The same from a model's pod (its image has Python but not httpx): a TCP connection.
CONNECT = """
import json, socket, sys
seen = {}
for target in sys.argv[1:]:
    host, port = target.rsplit(":", 1)
    try:
        socket.create_connection((host, int(port)), timeout=3).close()
        seen[target] = "open"
    except OSError as exc:
        seen[target] = type(exc).__name__
print(json.dumps(seen))
"""


@pytest.fixture(scope="module")
def enforced(real_node: RealNode, tools_built: None) -> Iterator[None]:
    with netpol.enforcing(real_node.cluster, real_node.name):
        yield


@pytest.fixture
def outsider(core: client.CoreV1Api) -> Iterator[str]:
    """A namespace no pool admits (at first)."""
    name = fresh_namespace(core, "outsider")
    yield name
    core.delete_namespace(name)


def _reach(
    api: client.ApiClient, node: RealNode, image: str, namespace: str, urls: list[str]
) -> dict[str, str]:
    """What a new pod in ``namespace`` on real-0 gets from each of ``urls``."""
    core = client.CoreV1Api(api)
    name = f"probe-{uuid.uuid4().hex[:5]}"
    probe = restricted_pod(node, image, name, ["python", "-c", PROBE, *urls])
    create_from_dict(api, probe, namespace=namespace)
    done = wait_for(
        f"probe {name} to finish",
        lambda: core.read_namespaced_pod(name, namespace),
        lambda p: str(p.status.phase) in ("Succeeded", "Failed"),
        timeout=90,
    )
    log = str(core.read_namespaced_pod_log(name, namespace))
    assert done.status.phase == "Succeeded", log
    core.delete_namespaced_pod(name, namespace, grace_period_seconds=0)
    seen: dict[str, str] = json.loads(log.strip().splitlines()[-1])
    return seen


def test_the_pools_policies_hold_on_its_real_pods(
    api: client.ApiClient,
    core: client.CoreV1Api,
    kubectl: Kubectl,
    module_namespace: str,
    outsider: str,
    real_node: RealNode,
    shoal_images: dict[str, str],
    served_pool: str,
    enforced: None,
) -> None:
    """The pool's NetworkPolicies, as the operator renders them, enforced on real pods
    by a real engine: kube-router's network policy controller on real-0 (iptables and
    ipsets; e2e/cluster/netpol.py). A tenant's pod reaches its pool's gateway but not
    the model's pods behind it; a namespace the pool does not admit reaches neither,
    until the pool admits it, and again not once the pool withdraws it; a model's pod
    reaches neither the API server nor the gateway. network-config-analyzer
    (tests/e2e/test_network_isolation.py) verifies the policies of every pool shape;
    this shows that they hold in a kernel."""
    shoal = Shoal(api)
    namespace, pool = module_namespace, served_pool
    image = shoal_images["operator"]
    gateway_ip = core.read_namespaced_service(
        gateway_name(pool), DEFAULT_GATEWAY_NAMESPACE
    ).spec.cluster_ip
    gateway = f"http://{gateway_ip}:8000/v2/health/ready"
    [model_pod] = model_pods(core, namespace)
    model = f"http://{model_pod.status.pod_ip}:8000/v2/health/ready"

    # A tenant: the gateway answers, the model's pod is closed.
    seen = _reach(api, real_node, image, namespace, [gateway, model])
    assert seen[gateway] == "200", seen
    assert seen[model] in REFUSED, seen
    # Not admitted: neither.
    seen = _reach(api, real_node, image, outsider, [gateway, model])
    assert seen[gateway] in REFUSED, seen
    assert seen[model] in REFUSED, seen

    # Admitted, then withdrawn: the gateway opens to the namespace, then closes.
    tenants = {"spec": {"tenants": {"namespaces": [namespace, outsider]}}}
    shoal.patch("TenantPool", pool, tenants)
    wait_for(
        "the admitted namespace to reach the gateway",
        lambda: _reach(api, real_node, image, outsider, [gateway])[gateway],
        lambda status: status == "200",
        timeout=90,
    )
    shoal.patch("TenantPool", pool, {"spec": {"tenants": {"namespaces": [namespace]}}})
    wait_for(
        "the withdrawn namespace to be refused again",
        lambda: _reach(api, real_node, image, outsider, [gateway])[gateway],
        lambda status: status in REFUSED,
        timeout=90,
    )

    # Egress: the model's pod reaches neither the API server (through the
    # kubernetes Service) nor the gateway.
    api_server = core.read_namespaced_service("kubernetes", "default").spec.cluster_ip
    targets = [f"{api_server}:443", f"{gateway_ip}:8000"]
    exec_ = ["exec", "-n", namespace, str(model_pod.metadata.name), "-c", SERVING_CONTAINER]
    out = kubectl(*exec_, "--", "python3", "-c", CONNECT, *targets)
    seen = json.loads(out.strip().splitlines()[-1])
    assert "open" not in seen.values(), seen
