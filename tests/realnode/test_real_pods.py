"""Real pods on the local cluster's real node real-0: containerd runs them with runc,
the kubelet mounts their volumes and probes them, kube-proxy load-balances a Service
over them. What a restricted Shoal pod needs from a node, checked on a real one."""

from __future__ import annotations

import subprocess
from pathlib import Path

import httpx
import pytest
from e2e.cluster import node as node_mod
from e2e.install import Kubectl
from kubernetes import client
from kubernetes.utils import create_from_dict

from tests.conftest import RealNode
from tests.realnode.conftest import pod_ready
from tests.support.wait import wait_for

GREETING = "hello from a ConfigMap\n"
PORT = 8080
# An HTTP/1.0 request with busybox's nc (Debian's static busybox wget crashes).
HTTP_GET = "printf 'GET / HTTP/1.0\\r\\n\\r\\n' | nc -w 5"
# busybox's httpd as PID 1 ignores SIGTERM: a short grace period keeps deletion quick.
GRACE_SECONDS = 1


def _restricted() -> dict[str, object]:
    return {
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "capabilities": {"drop": ["ALL"]},
    }


def web_pod_spec(node: RealNode) -> dict[str, object]:
    """An init container renders the page into an emptyDir from a ConfigMap; busybox's
    httpd serves it, readiness by httpGet; the restricted Pod Security profile."""
    return {
        **node.placement(),
        "terminationGracePeriodSeconds": GRACE_SECONDS,
        "automountServiceAccountToken": False,
        "securityContext": {
            "runAsNonRoot": True,
            "runAsUser": 65532,
            "runAsGroup": 65532,
            "fsGroup": 65532,
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "initContainers": [
            {
                "name": "render",
                "image": node.image,
                "imagePullPolicy": "Never",
                "command": [
                    "/bin/sh",
                    "-c",
                    "cat /config/greeting > /www/index.html && hostname >> /www/index.html"
                    ' && echo "rendered for $(hostname)"',
                ],
                "securityContext": _restricted(),
                "volumeMounts": [
                    {"name": "www", "mountPath": "/www"},
                    {"name": "config", "mountPath": "/config", "readOnly": True},
                ],
            }
        ],
        "containers": [
            {
                "name": "web",
                "image": node.image,
                "imagePullPolicy": "Never",
                "command": [
                    "/bin/sh",
                    "-c",
                    f'echo "serving on {PORT}"; exec httpd -f -vv -p {PORT} -h /www',
                ],
                "ports": [{"containerPort": PORT, "name": "http"}],
                "readinessProbe": {
                    "httpGet": {"path": "/index.html", "port": PORT},
                    "periodSeconds": 1,
                },
                "resources": {"limits": {"cpu": "100m", "memory": "32Mi"}},
                "securityContext": _restricted(),
                "volumeMounts": [{"name": "www", "mountPath": "/www", "readOnly": True}],
            }
        ],
        "volumes": [
            {"name": "www", "emptyDir": {"sizeLimit": "1Mi"}},
            {"name": "config", "configMap": {"name": "web"}},
        ],
    }


@pytest.fixture
def restricted_namespace(core: client.CoreV1Api, namespace: str) -> str:
    """The test's namespace, enforcing the restricted Pod Security profile, with the
    ConfigMap the pods mount."""
    labels = {"pod-security.kubernetes.io/enforce": "restricted"}
    core.patch_namespace(namespace, {"metadata": {"labels": labels}})
    core.create_namespaced_config_map(
        namespace,
        client.V1ConfigMap(metadata=client.V1ObjectMeta(name="web"), data={"greeting": GREETING}),
    )
    return namespace


def _pods(core: client.CoreV1Api, namespace: str, selector: str) -> list[client.V1Pod]:
    return list(core.list_namespaced_pod(namespace, label_selector=selector).items)


def _node_leftovers(node: RealNode) -> dict[str, object]:
    """What pods leave on the node while they exist: running tasks, network namespaces,
    address reservations, pod directories, volume mounts and pod cgroups."""
    r = node_mod.root(node.cluster)
    bin_dir = node_mod.ensure_binaries()
    tasks = subprocess.run(
        [
            str(bin_dir / "ctr"),
            f"--address={r / 'containerd' / 'containerd.sock'}",
            "--namespace=k8s.io",
            "tasks",
            "ls",
            "--quiet",
        ],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.split()
    ipam = r / "ipam" / "shoal-real-node"
    reserved = [p.name for p in ipam.iterdir() if p.name[0].isdigit()] if ipam.exists() else []
    pods_dir = r / "kubelet" / "pods"
    mounts = [
        line.split()[4]
        for line in Path("/proc/self/mountinfo").read_text().splitlines()
        if line.split()[4].startswith(f"{pods_dir}/")
    ]
    pod_cgroups = [p.name for c in node_mod.pod_cgroups() for p in c.rglob("pod*") if p.is_dir()]
    return {
        "tasks": tasks,
        "netns": sorted(p.name for p in node_mod.NETNS_DIR.glob("cni-*")),
        "ip reservations": reserved,
        "pod dirs": sorted(p.name for p in pods_dir.iterdir()) if pods_dir.exists() else [],
        "mounts": mounts,
        "pod cgroups": pod_cgroups,
    }


def _clean(leftovers: dict[str, object]) -> bool:
    return not any(leftovers.values())


@pytest.fixture
def clean_node(real_node: RealNode) -> RealNode:
    """real-0, holding nothing of any pod before the test (so what the test finds left
    over is its own)."""
    wait_for("a clean node before the test", lambda: _node_leftovers(real_node), _clean)
    return real_node


def test_real_node_is_opt_in_and_apart(core: client.CoreV1Api, real_node: RealNode) -> None:
    """real-0 is Ready with the real runtime, selected only by its label and taint, and
    KWOK does not manage it."""
    node = core.read_node(real_node.name)
    assert (node.metadata.labels or {})[real_node.label] == "true"
    assert "kwok.x-k8s.io/node" not in (node.metadata.annotations or {})
    taints = [(t.key, t.value, t.effect) for t in node.spec.taints or []]
    assert (real_node.label, "true", "NoSchedule") in taints
    assert node.status.node_info.container_runtime_version.startswith("containerd://")
    addresses = {(a.type, a.address) for a in node.status.addresses}
    assert ("InternalIP", node_mod.NODE_IP) in addresses
    others = core.list_node(label_selector=f"!{real_node.label}").items
    assert others, "the simulated nodes are still there"
    assert all(n.metadata.annotations.get("kwok.x-k8s.io/node") == "fake" for n in others)


def test_pod_without_placement_never_lands_on_real_node(
    api: client.ApiClient, core: client.CoreV1Api, real_node: RealNode, namespace: str
) -> None:
    """The taint keeps pods that did not ask for real-0 off it: a pod that only selects
    it stays Pending, and an unconstrained pod goes to a simulated node."""
    base = {"containers": [{"name": "c", "image": real_node.image}]}
    selects = {**base, "nodeSelector": {real_node.label: "true"}}
    for name, spec in (("selects-only", selects), ("anywhere", base)):
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec}
        create_from_dict(api, pod, namespace=namespace)
    anywhere = wait_for(
        "the unconstrained pod bound",
        lambda: core.read_namespaced_pod("anywhere", namespace),
        lambda p: bool(p.spec.node_name),
    )
    assert anywhere.spec.node_name != real_node.name
    selects_only = wait_for(
        "the scheduler's verdict on the pod that does not tolerate the taint",
        lambda: core.read_namespaced_pod("selects-only", namespace),
        lambda p: any(c.type == "PodScheduled" for c in (p.status.conditions or [])),
    )
    assert not selects_only.spec.node_name
    [scheduled] = [c for c in selects_only.status.conditions if c.type == "PodScheduled"]
    assert scheduled.status == "False"
    assert "untolerated taint" in (scheduled.message or "")


def test_restricted_pod_runs_for_real(
    api: client.ApiClient,
    core: client.CoreV1Api,
    kubectl: Kubectl,
    clean_node: RealNode,
    restricted_namespace: str,
) -> None:
    """Init container, emptyDir, ConfigMap volume, restricted security context, httpGet
    readiness; logs and exec through the API server; deletion releases everything."""
    real_node = clean_node
    ns = restricted_namespace
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "web", "labels": {"app": "web"}},
        "spec": web_pod_spec(real_node),
    }
    create_from_dict(api, pod, namespace=ns)
    ready = wait_for(
        "the pod Ready on real-0",
        lambda: core.read_namespaced_pod("web", ns),
        pod_ready,
        timeout=90,
    )
    assert ready.spec.node_name == real_node.name
    assert ready.status.pod_ip.startswith("10.200.0.")
    [init] = ready.status.init_container_statuses or []
    assert init.state.terminated
    assert init.state.terminated.exit_code == 0

    page = httpx.get(f"http://{ready.status.pod_ip}:{PORT}/index.html", timeout=5).text
    assert page == f"{GREETING}web\n"
    assert kubectl("logs", "-n", ns, "web", "-c", "render").strip() == "rendered for web"
    assert f"serving on {PORT}" in kubectl("logs", "-n", ns, "web", "-c", "web")

    def exec_(*argv: str, check: bool = True) -> str:
        return kubectl("exec", "-n", ns, "web", "-c", "web", "--", *argv, check=check)

    assert exec_("id", "-u").strip() == "65532"
    status = dict(
        line.split(":\t", 1)
        for line in exec_("cat", "/proc/self/status").splitlines()
        if ":\t" in line
    )
    assert status["CapEff"] == status["CapPrm"] == "0000000000000000"
    assert status["NoNewPrivs"] == "1"
    assert status["Seccomp"] == "2"  # filter mode: the runtime's default profile
    assert "Read-only file system" in exec_("sh", "-c", "echo x > /x", check=False)
    assert "Read-only file system" in exec_("sh", "-c", "echo x > /www/x", check=False)
    assert exec_("cat", "/www/index.html") == page
    # The pod reaches the API server through the kubernetes Service (kube-proxy to the
    # bridge address): a TLS port that answers plain HTTP with 400.
    reply = exec_("sh", "-c", f"{HTTP_GET} 10.96.0.1 443")
    assert reply.startswith("HTTP/1.0 400 Bad Request"), reply

    core.delete_namespaced_pod("web", ns)
    wait_for(
        "the pod gone",
        lambda: [p.metadata.name for p in _pods(core, ns, "app=web")],
        lambda names: not names,
        timeout=60,
    )
    wait_for("the node to release the pod", lambda: _node_leftovers(real_node), _clean, timeout=60)


def test_cluster_ip_service_load_balances_over_real_pods(
    api: client.ApiClient,
    core: client.CoreV1Api,
    apps: client.AppsV1Api,
    kubectl: Kubectl,
    clean_node: RealNode,
    restricted_namespace: str,
) -> None:
    """A ClusterIP Service over two real pods: kube-proxy (nftables) spreads connections
    from the host and from a pod over both; scaling to zero releases the node."""
    real_node = clean_node
    ns = restricted_namespace
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web"},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}}, "spec": web_pod_spec(real_node)},
        },
    }
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "web"},
        "spec": {"selector": {"app": "web"}, "ports": [{"port": 80, "targetPort": PORT}]},
    }
    for obj in (deployment, service):
        create_from_dict(api, obj, namespace=ns)
    pods = wait_for(
        "two pods Ready on real-0",
        lambda: _pods(core, ns, "app=web"),
        lambda ps: len(ps) == 2 and all(pod_ready(p) for p in ps),
        timeout=90,
    )
    assert {p.spec.node_name for p in pods} == {real_node.name}
    names = {str(p.metadata.name) for p in pods}
    cluster_ip = core.read_namespaced_service("web", ns).spec.cluster_ip

    def served_by(body: str) -> str:
        return body.removeprefix(GREETING).strip()

    seen_from_host: set[str] = set()

    def from_host() -> set[str]:
        # A new connection each time: kube-proxy picks a backend per connection.
        seen_from_host.add(served_by(httpx.get(f"http://{cluster_ip}/", timeout=5).text))
        return seen_from_host

    wait_for("both pods answering the ClusterIP from the host", from_host, lambda s: s == names)

    client_pod = sorted(names)[0]
    loop = f"for i in $(seq 30); do {HTTP_GET} {cluster_ip} 80; done"
    out = kubectl("exec", "-n", ns, client_pod, "-c", "web", "--", "sh", "-c", loop)
    # Each answer's body is the greeting line, then the name of the pod that served it.
    assert out.count(GREETING) == 30, out
    seen_from_pod = {line.strip() for line in out.splitlines()} & names
    assert seen_from_pod == names, out

    apps.patch_namespaced_deployment_scale("web", ns, {"spec": {"replicas": 0}})
    wait_for(
        "the pods gone",
        lambda: _pods(core, ns, "app=web"),
        lambda ps: not ps,
        timeout=60,
    )
    wait_for("the node to release the pods", lambda: _node_leftovers(real_node), _clean, timeout=60)
