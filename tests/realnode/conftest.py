"""Fixtures of the real-node tier: the images Shoal's pods run, on real-0."""

from __future__ import annotations

import json
import subprocess
import time
import uuid
from collections.abc import Generator, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import pytest
from e2e.cluster import image_builds, netpol
from e2e.cluster import node as node_mod
from e2e.cluster.local import ensure_tool
from e2e.linear_model import BODY, linear_model
from e2e.model_store import host_volume, write_repository
from e2e.object_store import TOOL as STORE_TOOL
from e2e.object_store import ObjectStore, object_store
from e2e.operator import OperatorProcess
from kubernetes import client
from kubernetes.utils import create_from_dict

from shoal.render.gateway import DEFAULT_GATEWAY_NAMESPACE, audience, gateway_name
from tests.conftest import RealNode
from tests.support.shoal_objects import GROUP, VERSION, Shoal
from tests.support.wait import wait_for

CLIENT_TOKEN_DIR = "/var/run/secrets/shoal"
# A gateway pod's grace period is 30 s; leaving, it takes its 5 s pre-stop pause and
# HAProxy's soft stop, and the deletion reaches it through the operator and the
# garbage collector.
GATEWAY_STOP_SECONDS = 20
# A client's steady load, run in a pod: THREADS clients send back to back until at least
# REQUESTS are answered and SECONDS have passed, each on one kept-alive connection (or,
# with KEEPALIVE=0, a new connection per request, balanced afresh by kube-proxy). Every
# second, and once more at the end, it prints the tally of statuses (or errors) so far.
LOAD_SCRIPT = """
import collections, json, os, threading, time, httpx
url = os.environ["GATEWAY"] + "/v2/models/linear/infer"
body = json.loads(os.environ["BODY"])
headers = {"Authorization": "Bearer " + open(os.environ["TOKEN"]).read().strip()}
want, seconds = int(os.environ["REQUESTS"]), float(os.environ["SECONDS"])
keepalive = int(os.environ.get("KEEPALIVE", "1"))
counts, lock = collections.Counter(), threading.Lock()
start = time.monotonic()
def done():
    return sum(counts.values()) >= want and time.monotonic() - start >= seconds
def client():
    limits = httpx.Limits(max_keepalive_connections=None if keepalive else 0)
    with httpx.Client(timeout=30, limits=limits) as http:
        while not done():
            try:
                outcome = str(http.post(url, json=body, headers=headers).status_code)
            except httpx.HTTPError as exc:
                outcome = type(exc).__name__
            with lock:
                counts[outcome] += 1
def tally():
    return json.dumps({"seconds": round(time.monotonic() - start, 1), "outcomes": counts})
threads = [threading.Thread(target=client) for _ in range(int(os.environ["THREADS"]))]
for t in threads:
    t.start()
while any(t.is_alive() for t in threads):
    time.sleep(1)
    print(tally(), flush=True)
print(tally(), flush=True)
"""


def load_tally(log: str) -> dict[str, Any]:
    """The last tally a load pod printed (none yet: nothing counted)."""
    lines = [line for line in log.splitlines() if line.startswith("{")]
    return json.loads(lines[-1]) if lines else {"seconds": 0.0, "outcomes": {}}


# The tests of the node itself need none of Shoal's images: they run first, while the
# images (1.6 GB) are imported in the background.
NODE_ONLY = "test_real_pods.py"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    items.sort(key=lambda item: Path(str(item.fspath)).name != NODE_ONLY)


@dataclass(frozen=True)
class Builds:
    """The tier's images and test tools, being built (or found cached) in the background
    once real-0 is up, while the tests of the node itself run (they need neither). Not
    earlier: beside the node's own Go build, on two cores, they only slow it down."""

    images: Future[dict[str, Path]]
    tools: Future[list[Path]]


def _build_tools() -> list[Path]:
    return [ensure_tool(netpol.TOOL_DIR, netpol.PACKAGE, netpol.NAME), ensure_tool(*STORE_TOOL)]


@pytest.fixture(scope="session")
def _builds(real_node: RealNode) -> Iterator[Builds]:
    with ThreadPoolExecutor(max_workers=2) as pool:
        yield Builds(pool.submit(image_builds.ensure_all), pool.submit(_build_tools))


@pytest.fixture(scope="session")
def _images_imported(real_node: RealNode, _builds: Builds) -> Iterator[Future[None]]:
    """The images Shoal's pods name, built here or found cached, being imported into
    real-0's containerd from the tier's first test on."""
    with ThreadPoolExecutor(max_workers=1) as pool:
        yield pool.submit(_import_images, real_node, _builds.images)


@pytest.fixture(autouse=True)
def _start_importing(_images_imported: Future[None]) -> None:
    """Every test of the tier starts the import (the first one really does)."""


@pytest.fixture(scope="session", autouse=True)
def _no_pools_of_earlier_tiers(api: client.ApiClient, operator: OperatorProcess) -> None:
    """The tier shares its cluster with the tiers before it, and the pools they leave
    (the examples the cluster tier applies) would each get a gateway on real-0: this
    tier's operators, the session's and the chart's, place every pool's gateway there,
    and real-0's two cores cannot hold them beside the tier's own. Their models are
    deleted first (a pool's deletion waits for its models), then the pools, through the
    session's operator, before the tier's first test."""
    shoal = Shoal(api)
    custom = client.CustomObjectsApi(api)

    def models() -> list[tuple[str, str]]:
        listed = custom.list_cluster_custom_object(GROUP, VERSION, "inferencemodels")
        items = cast("dict[str, Any]", listed)["items"]
        return [(str(m["metadata"]["namespace"]), str(m["metadata"]["name"])) for m in items]

    def pools() -> list[str]:
        listed = custom.list_cluster_custom_object(GROUP, VERSION, "tenantpools")
        return [str(p["metadata"]["name"]) for p in cast("dict[str, Any]", listed)["items"]]

    for namespace, name in models():
        shoal.delete("InferenceModel", name, namespace)
    wait_for("the earlier tiers' models gone", models, lambda left: not left, timeout=180)
    for name in pools():
        shoal.delete("TenantPool", name)
    wait_for("the earlier tiers' pools gone", pools, lambda left: not left, timeout=120)


@pytest.fixture(autouse=True)
def _node_settled(real_node: RealNode, core: client.CoreV1Api) -> None:
    """Every test starts on a node where nothing is still terminating: real-0 has two
    cores, and a pod of the last test on its way out (a gateway's drain, a namespace
    being deleted) still holds its CPU request against the scheduler."""
    wait_for(
        "the pods leaving real-0 gone",
        lambda: [p for p in node_pods(core, real_node) if p.metadata.deletion_timestamp],
        lambda leaving: not leaving,
        timeout=120,
    )


def node_pods(core: client.CoreV1Api, node: RealNode) -> list[client.V1Pod]:
    return list(core.list_pod_for_all_namespaces(field_selector=f"spec.nodeName={node.name}").items)


def node_load(core: client.CoreV1Api, node: RealNode) -> str:
    """What holds real-0's CPU: each pod bound to it, its phase and its CPU requests."""
    lines = []
    for pod in node_pods(core, node):
        cpu = [
            str(((c.resources and c.resources.requests) or {}).get("cpu", "-"))
            for c in pod.spec.containers
        ]
        leaving = " (terminating)" if pod.metadata.deletion_timestamp else ""
        where = f"{pod.metadata.namespace}/{pod.metadata.name}"
        lines.append(f"{where} {pod.status.phase}{leaving} cpu={'+'.join(cpu)}")
    return "\n".join(lines) or "(no pods)"


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """A failed test of the tier reports what ran on real-0 when it failed: most waits
    that time out there are a pod the scheduler could not place."""
    report = yield
    funcargs = getattr(item, "funcargs", {})
    if report.when == "call" and report.failed and "core" in funcargs and "real_node" in funcargs:
        try:
            load = node_load(funcargs["core"], funcargs["real_node"])
        except Exception as exc:  # the report must not hide the test's own failure
            load = f"could not list real-0's pods: {exc}"
        report.sections.append(("pods on real-0", load))
    return report


def _import_images(real_node: RealNode, built: Future[dict[str, Path]]) -> None:
    node_mod.import_archives(real_node.cluster, list(built.result().values()))


@pytest.fixture(scope="session")
def shoal_images(_images_imported: Future[None]) -> dict[str, str]:
    """The images Shoal's pods name (the operator's from its Dockerfile, stand-ins for
    Triton, HAProxy and rclone) in real-0's containerd under the names Shoal renders.
    Maps each role to its image."""
    _images_imported.result()
    return {
        "operator": image_builds.OPERATOR,
        "triton": image_builds.TRITON,
        "haproxy": image_builds.HAPROXY,
        "fetch": image_builds.RCLONE,
    }


@pytest.fixture(scope="session")
def operator_env(real_node: RealNode) -> dict[str, str]:
    """The tier's operator places the pools' gateways on real-0, where they run for
    real (an admin's chart values gateway.nodeSelector and gateway.tolerations)."""
    placement = real_node.placement()
    return {
        "SHOAL_GATEWAY_NODE_SELECTOR": json.dumps(placement["nodeSelector"]),
        "SHOAL_GATEWAY_TOLERATIONS": json.dumps(placement["tolerations"]),
    }


def real_node_pool(name: str, namespaces: list[str], node: RealNode) -> dict[str, Any]:
    """A Shared pool whose model pods run on real-0 (its label and taint); its gateway
    off (a test turns it on)."""
    return {
        "apiVersion": "shoal.dev/v1alpha1",
        "kind": "TenantPool",
        "metadata": {"name": name},
        "spec": {
            "isolation": "Shared",
            "tenants": {"namespaces": namespaces},
            "placement": {
                "nodeSelector": {node.label: "true"},
                "tolerations": [
                    {
                        "key": node.label,
                        "operator": "Equal",
                        "value": "true",
                        "effect": "NoSchedule",
                    }
                ],
            },
            "quota": {"gpus": 1},
            "gateway": {"enabled": False},
        },
    }


@pytest.fixture(scope="session")
def tools_built(_builds: Builds) -> None:
    """kube-router and the object store, built (the background build is awaited)."""
    _builds.tools.result()


@pytest.fixture(scope="session")
def store(real_node: RealNode, tools_built: None) -> Iterator[ObjectStore]:
    """The rig's S3-compatible object store, on real-0's bridge address."""
    with object_store(node_mod.NODE_IP, real_node.cluster.logs) as running:
        yield running


@pytest.fixture
def model_claim(
    api: client.ApiClient, core: client.CoreV1Api, namespace: str, tmp_path: Path
) -> Iterator[tuple[str, Path]]:
    """A claim bound to a hostPath volume on real-0 holding a model repository's
    ``linear/1/model.py`` (and a stale config.pbtxt the rendered one must beat)."""
    with claim_of_model(api, core, namespace, tmp_path) as claim:
        yield claim


@contextmanager
def claim_of_model(
    api: client.ApiClient, core: client.CoreV1Api, namespace: str, directory: Path
) -> Iterator[tuple[str, Path]]:
    """The claim of :func:`model_claim`, its files under ``directory``."""
    source = directory / "claim"
    write_repository(source, extra={"config.pbtxt": 'name: "linear"\nbackend: "nonexistent"\n'})
    directory.chmod(0o755)
    name = "model-store"
    volume = f"{namespace}-{uuid.uuid4().hex[:6]}"
    create_from_dict(api, host_volume(volume, source, namespace, name))
    create_from_dict(
        api,
        {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {"name": name},
            "spec": {
                "accessModes": ["ReadOnlyMany"],
                "storageClassName": "",
                "volumeName": volume,
                "resources": {"requests": {"storage": "1Gi"}},
            },
        },
        namespace=namespace,
    )
    try:
        yield name, source
    finally:
        core.delete_persistent_volume(volume)


def model_doc(
    pool: str,
    storage: str,
    replicas: int = 1,
    s3: dict[str, Any] | None = None,
    runtime: dict[str, Any] | None = None,
) -> dict[str, Any]:
    scaling = {"minReplicas": replicas, "maxReplicas": max(2, replicas)}
    body = linear_model(1, 0.1, pool=pool, scaling=scaling)
    del body["metadata"]["namespace"]
    body["spec"]["model"]["storageUri"] = storage
    if s3 is not None:
        body["spec"]["model"]["s3"] = s3
    # The stand-in image carries the real server: a few seconds to start on 2 cores.
    # A quarter of one of real-0's two cores leaves room for the gateway's pods.
    body["spec"]["runtime"].update(startupTimeout="120s", cpu="250m", memory="1Gi")
    body["spec"]["runtime"].update(runtime or {})
    return body


def model_pods(core: client.CoreV1Api, namespace: str) -> list[client.V1Pod]:
    selector = "app.kubernetes.io/instance=linear"
    return list(core.list_namespaced_pod(namespace, label_selector=selector).items)


def gateway_pods(core: client.CoreV1Api, pool: str) -> list[client.V1Pod]:
    selector = f"app.kubernetes.io/instance={gateway_name(pool)}"
    return list(core.list_namespaced_pod(DEFAULT_GATEWAY_NAMESPACE, label_selector=selector).items)


@contextmanager
def model_on_real_node(
    api: client.ApiClient,
    namespace: str,
    node: RealNode,
    storage: str,
    *,
    gateway: bool = False,
    replicas: int = 1,
    s3: dict[str, Any] | None = None,
    download: dict[str, Any] | None = None,
    other_tenants: tuple[str, ...] = (),
    runtime: dict[str, Any] | None = None,
) -> Iterator[str]:
    """A pool on real-0 (with one gateway replica when asked, and ``download`` as its
    ``access.modelDownload``) and the linear model from ``storage`` (with ``s3`` as its
    store, and ``runtime`` over its spec.runtime) in ``namespace``, the pool admitting
    ``other_tenants`` too; yields the pool's name. On the way out both are deleted and
    their pods awaited gone, so the next test finds the node clean."""
    shoal = Shoal(api)
    core = client.CoreV1Api(api)
    pool = f"real-{uuid.uuid4().hex[:6]}"
    doc = real_node_pool(pool, [namespace, *other_tenants], node)
    if gateway:
        doc["spec"]["gateway"] = {"enabled": True, "replicas": 1}
    if download is not None:
        doc["spec"]["access"] = {"modelDownload": download}
    shoal.create(doc)
    gateway_stop_s = 0.0
    try:
        shoal.create(model_doc(pool, storage, replicas, s3, runtime), namespace)
        yield pool
    finally:
        shoal.delete("InferenceModel", "linear", namespace)
        wait_for(
            "the model's pods gone",
            lambda: model_pods(core, namespace),
            lambda p: not p,
            timeout=90,
        )
        deleted = time.monotonic()
        shoal.delete("TenantPool", pool)
        wait_for(
            "the gateway's pods gone", lambda: gateway_pods(core, pool), lambda p: not p, timeout=90
        )
        gateway_stop_s = time.monotonic() - deleted
    # Reached only when the test passed. A gateway pod stops within its pre-stop pause
    # and HAProxy's soft stop; a container that ignores SIGTERM holds it for the whole
    # grace period instead.
    assert gateway_stop_s < GATEWAY_STOP_SECONDS, (
        f"the gateway's pods took {gateway_stop_s:.0f} s to go once their pool was deleted"
    )


def pod_ready(pod: client.V1Pod) -> bool:
    """Whether the pod's Ready condition is True."""
    conditions = (pod.status.conditions or []) if pod.status else []
    return any(c.type == "Ready" and c.status == "True" for c in conditions)


def container_status(pod: client.V1Pod, name: str) -> client.V1ContainerStatus:
    return next(c for c in pod.status.container_statuses or [] if c.name == name)


def signal_container(node: RealNode, pod: client.V1Pod, name: str, signal: str) -> None:
    """Send ``signal`` to a container's process through the node's containerd: SIGKILL
    as the kernel's OOM killer or a crash would end it, SIGSTOP to hang it."""
    container_id = str(container_status(pod, name).container_id).removeprefix("containerd://")
    ctr = node_mod.ensure_binaries() / "ctr"
    socket = node_mod.root(node.cluster) / "containerd" / "containerd.sock"
    kill = ["tasks", "kill", f"--signal={signal}", container_id]
    subprocess.run(
        [str(ctr), f"--address={socket}", "--namespace=k8s.io", *kill],
        check=True,
        capture_output=True,
    )


def restricted_pod(
    node: RealNode,
    image: str,
    name: str,
    command: list[str],
    *,
    env: dict[str, str] | None = None,
    volumes: list[dict[str, Any]] | None = None,
    mounts: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """A pod on real-0 that runs ``command`` once, under the restricted profile."""
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
                    "name": "client",
                    "image": image,
                    "imagePullPolicy": "Never",
                    "command": command,
                    "env": [{"name": k, "value": v} for k, v in (env or {}).items()],
                    "securityContext": {
                        "allowPrivilegeEscalation": False,
                        "readOnlyRootFilesystem": True,
                        "capabilities": {"drop": ["ALL"]},
                    },
                    "volumeMounts": mounts or [],
                }
            ],
            "volumes": volumes or [],
        },
    }


def tenant_pod(
    node: RealNode,
    image: str,
    gateway: str,
    pool: str,
    *,
    name: str,
    script: str,
    env: dict[str, str] | None = None,
) -> dict[str, Any]:
    """A tenant's pod on real-0 running ``script`` with a projected token for the pool's
    gateway audience, under the restricted profile."""
    token = {
        "serviceAccountToken": {
            "audience": audience(pool),
            "expirationSeconds": 600,
            "path": "token",
        }
    }
    return restricted_pod(
        node,
        image,
        name,
        ["python", "-c", script],
        env={
            "GATEWAY": gateway,
            "BODY": json.dumps(BODY),
            "TOKEN": f"{CLIENT_TOKEN_DIR}/token",
            **(env or {}),
        },
        volumes=[{"name": "token", "projected": {"sources": [token]}}],
        mounts=[{"name": "token", "mountPath": CLIENT_TOKEN_DIR, "readOnly": True}],
    )
