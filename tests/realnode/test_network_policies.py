"""A pool's NetworkPolicies, as the operator renders them, enforced on real pods by a
real engine: kube-router's network policy controller on real-0 (iptables and ipsets;
e2e/cluster/netpol.py). A tenant's pod reaches its pool's gateway but not the model's
pods behind it; a namespace the pool does not admit reaches neither, until the pool
admits it, and again not once the pool withdraws it; a model's pod reaches neither the
API server nor the gateway. network-config-analyzer (tests/e2e/test_network_isolation.py)
still verifies the policies of every pool shape; this shows that they hold in a kernel.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from e2e.cluster import netpol
from e2e.install import Kubectl
from e2e.operator import OperatorProcess
from kubernetes import client
from kubernetes.utils import create_from_dict

from shoal.render.gateway import DEFAULT_GATEWAY_NAMESPACE, gateway_name
from shoal.render.names import SERVING_CONTAINER
from tests.conftest import RealNode
from tests.realnode.conftest import model_on_real_node, model_pods
from tests.support.shoal_objects import Shoal, wait_ready
from tests.support.wait import wait_for

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
def enforced(real_node: RealNode) -> Iterator[None]:
    with netpol.enforcing(real_node.cluster, real_node.name):
        yield


@pytest.fixture
def outsider(core: client.CoreV1Api) -> Iterator[str]:
    """A namespace no pool admits (at first)."""
    name = f"t-outsider-{uuid.uuid4().hex[:5]}"
    core.create_namespace(
        client.V1Namespace(metadata=client.V1ObjectMeta(name=name, labels={"shoal.dev/test": "1"}))
    )
    wait_for(
        "its default ServiceAccount",
        lambda: core.read_namespaced_service_account("default", name),
        lambda sa: sa is not None,
    )
    yield name
    core.delete_namespace(name)


def _probe_pod(node: RealNode, image: str, name: str, urls: list[str]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            **node.placement(),
            "restartPolicy": "Never",
            "automountServiceAccountToken": False,
            "securityContext": {
                "runAsNonRoot": True,
                "runAsUser": 65532,
                "seccompProfile": {"type": "RuntimeDefault"},
            },
            "containers": [
                {
                    "name": "probe",
                    "image": image,
                    "imagePullPolicy": "Never",
                    "command": ["python", "-c", PROBE, *urls],
                    "securityContext": {
                        "allowPrivilegeEscalation": False,
                        "readOnlyRootFilesystem": True,
                        "capabilities": {"drop": ["ALL"]},
                    },
                }
            ],
        },
    }


def _reach(
    api: client.ApiClient, node: RealNode, image: str, namespace: str, urls: list[str]
) -> dict[str, str]:
    """What a new pod in ``namespace`` on real-0 gets from each of ``urls``."""
    core = client.CoreV1Api(api)
    name = f"probe-{uuid.uuid4().hex[:5]}"
    create_from_dict(api, _probe_pod(node, image, name, urls), namespace=namespace)
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


def test_a_pools_policies_hold_on_real_pods(
    api: client.ApiClient,
    core: client.CoreV1Api,
    kubectl: Kubectl,
    operator: OperatorProcess,
    namespace: str,
    outsider: str,
    real_node: RealNode,
    shoal_images: dict[str, str],
    model_claim: tuple[str, Path],
    enforced: None,
) -> None:
    shoal = Shoal(api)
    claim, _ = model_claim
    image = shoal_images["operator"]
    with model_on_real_node(
        api, namespace, real_node, f"pvc://{claim}/linear", gateway=True
    ) as pool:
        wait_ready(shoal, namespace, "linear", timeout=240)
        wait_for(
            "the pool's gateway pod Ready",
            lambda: (shoal.get("TenantPool", pool).get("status") or {}).get("gateway") or {},
            lambda g: g.get("readyReplicas") == 1,
            timeout=180,
        )
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
