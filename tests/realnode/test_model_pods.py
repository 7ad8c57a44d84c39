"""A model as the operator renders it, run for real on real-0: the fetch init container
(rclone) copies the model's files from the rig's S3-compatible store or downloads and
unpacks an archive from an HTTPS server of a private CA, or links them from a read-only
claim; tritonserver (the wheel's real server in a stand-in of NVIDIA's image) loads them
beside the rendered config under a read-only root, the kubelet's probes make the replica
Ready, and a request through the model's Service is answered. No GPU here: the model
asks for none and Triton runs on the CPU. What stands in: the images (built here,
e2e/cluster/image_builds.py), the object store (gofakes3, e2e/object_store.py) and the
HTTPS server (Python's, e2e/https_files.py).
"""

from __future__ import annotations

import io
import json
import tarfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest
from e2e.cluster.node import NODE_IP
from e2e.https_files import FileServer, https_files
from e2e.linear_model import BODY
from e2e.model_store import write_repository
from e2e.object_store import ObjectStore
from e2e.operator import OperatorProcess
from kubernetes import client
from kubernetes.utils import create_from_dict

from shoal.api.inferencemodel import S3_ACCESS_KEY, S3_SECRET_KEY
from shoal.render.names import FETCH_CONTAINER, SERVING_CONTAINER
from tests.conftest import RealNode
from tests.realnode.conftest import (
    LOAD_SCRIPT,
    load_tally,
    model_on_real_node,
    model_pods,
    pod_ready,
    tenant_pod,
)
from tests.support.shoal_objects import Shoal, condition, wait_ready, wait_reason
from tests.support.wait import wait_for

INFER = "/v2/models/linear/infer"


def _tar_gz(directory: Path) -> bytes:
    """The files under ``directory`` at the root of a .tar.gz, as a model archive holds
    its version directories."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz") as tar:
        for path in sorted(directory.rglob("*")):
            tar.add(path, arcname=path.relative_to(directory).as_posix(), recursive=False)
    return out.getvalue()


@pytest.fixture
def files(real_node: RealNode, tmp_path: Path) -> Iterator[FileServer]:
    """The linear model's version directories in linear.tar.gz, served over HTTPS on
    real-0's bridge address with a certificate of a private CA."""
    served = tmp_path / "served"
    write_repository(served)
    (served / "linear.tar.gz").write_bytes(_tar_gz(served / "linear"))
    with https_files(served, NODE_IP, tmp_path / "tls") as running:
        yield running


def test_a_model_comes_from_an_s3_compatible_store_and_an_empty_one_says_so(
    api: client.ApiClient,
    core: client.CoreV1Api,
    operator: OperatorProcess,
    namespace: str,
    real_node: RealNode,
    shoal_images: dict[str, str],
    store: ObjectStore,
    files: FileServer,
    tmp_path: Path,
) -> None:
    """The fetch container downloads over S3 from the rig's object store, with the keys
    of the model's Secret, as from MinIO in a cluster. While the bucket holds nothing
    under the model's path, the model says FailedToFetch with rclone's own words (an
    object store has no directories to be missing: copying nothing is the failure).
    Once the files are uploaded, the kubelet's next try of the fetch container copies
    them and Triton serves them. The pool lets the downloads reach the store's address
    and port, which is what a cluster's own object store needs.

    Then its size: a model declaring more than the node's disk gets a replica the
    scheduler places nowhere (the old one serves on); one that fits, from an HTTPS
    archive behind a private CA named in its caBundle, is downloaded, unpacked and
    served, its copy bounded by the size and requested as ephemeral-storage."""
    shoal = Shoal(api)
    bucket = f"models-{uuid.uuid4().hex[:8]}"
    store.create_bucket(bucket)
    core.create_namespaced_config_map(
        namespace,
        client.V1ConfigMap(
            metadata=client.V1ObjectMeta(name="files-ca"),
            data={"ca.crt": files.ca_pem.decode()},
        ),
    )
    secret_key = uuid.uuid4().hex
    core.create_namespaced_secret(
        namespace,
        client.V1Secret(
            metadata=client.V1ObjectMeta(name="store-keys"),
            string_data={S3_ACCESS_KEY: "shoal", S3_SECRET_KEY: secret_key},
        ),
    )
    endpoint, https = urlsplit(store.endpoint), urlsplit(files.url)
    download = {
        "extraDestinations": [
            {"cidr": f"{endpoint.hostname}/32", "port": endpoint.port},
            {"cidr": f"{https.hostname}/32", "port": https.port},
        ]
    }
    s3 = {"endpoint": store.endpoint, "region": "us-east-1", "credentialsSecret": "store-keys"}
    storage = f"s3://{bucket}/linear"
    with model_on_real_node(api, namespace, real_node, storage, s3=s3, download=download):
        model = wait_reason(shoal, namespace, "linear", "FailedToFetch", timeout=120)
        message = condition(model, "Ready")["message"]
        assert "nothing to transfer" in message, message

        repository = tmp_path / "repository"
        write_repository(repository)
        assert store.upload(bucket, "linear", repository / "linear") == ["linear/1/model.py"]
        wait_ready(shoal, namespace, "linear", timeout=180)
        [pod] = _serving(core, namespace)
        [fetch] = pod.status.init_container_statuses or []
        assert fetch.last_state.terminated.exit_code == 9, "the try that found nothing"
        assert fetch.state.terminated.exit_code == 0
        reply = httpx.post(f"http://{pod.status.pod_ip}:8000{INFER}", json=BODY, timeout=10)
        assert reply.status_code == 200, reply.text
        assert reply.json()["outputs"][0]["data"] == [0, 1, 2, 3]
        # The keys reached the container from the Secret, and show nowhere in the pod.
        assert secret_key not in json.dumps(api.sanitize_for_serialization(pod))
        [spec] = pod.spec.init_containers or []
        assert f"--s3-endpoint={store.endpoint}" in (spec.args or [])
        refs = {e.name: e.value_from.secret_key_ref for e in spec.env or [] if e.value_from}
        assert {name: (ref.name, ref.key) for name, ref in refs.items()} == {
            S3_ACCESS_KEY: ("store-keys", S3_ACCESS_KEY),
            S3_SECRET_KEY: ("store-keys", S3_SECRET_KEY),
        }

        # More than the node's disk: the scheduler finds no node for the new replica.
        shoal.patch("InferenceModel", "linear", {"spec": {"model": {"size": "512Ti"}}}, namespace)
        unplaced = wait_for(
            "a replica the scheduler cannot place",
            lambda: [p for p in _serving(core, namespace) if _unschedulable(p)],
            lambda pods: len(pods) == 1,
            timeout=60,
        )
        assert "Insufficient ephemeral-storage" in _unschedulable(unplaced[0]), unplaced
        assert [p.metadata.name for p in _serving(core, namespace) if pod_ready(p)] == [
            pod.metadata.name
        ], "the replica that fits serves on"

        # An archive from a server of a private CA, its size declared: served.
        archive = {
            "storageUri": f"{files.url}/linear.tar.gz",
            "s3": None,
            "size": "64Mi",
            "caBundle": {"name": "files-ca"},
        }
        shoal.patch("InferenceModel", "linear", {"spec": {"model": archive}}, namespace)
        [pod] = wait_for(
            "the archive's replica Ready, alone",
            lambda: _serving(core, namespace),
            lambda pods: (
                len(pods) == 1 and pod_ready(pods[0]) and pods[0].metadata.name != pod.metadata.name
            ),
            timeout=180,
        )
        reply = httpx.post(f"http://{pod.status.pod_ip}:8000{INFER}", json=BODY, timeout=10)
        assert reply.status_code == 200, reply.text
        [fetching] = pod.spec.init_containers or []
        args = fetching.args or []
        assert args[0] == "copyurl"
        assert "--ca-cert=/etc/shoal/ca/ca.crt" in args
        name = str(pod.metadata.name)
        log = core.read_namespaced_pod_log(name, namespace, container=FETCH_CONTAINER)
        assert "unpacked the archive" in log, log
        [files_volume] = [v for v in pod.spec.volumes or [] if v.name == "model-repository"]
        assert files_volume.empty_dir.size_limit == "192Mi"  # 2 x 64Mi unpacking, +64Mi
        assert (fetching.resources.requests or {})["ephemeral-storage"] == "192Mi"
        [triton] = pod.spec.containers
        assert (triton.resources.requests or {})["ephemeral-storage"] == "128Mi"


def _unschedulable(pod: client.V1Pod) -> str:
    """The scheduler's message on a pod it could not place ('' when placed)."""
    for cond in (pod.status.conditions or []) if pod.status else []:
        if cond.type == "PodScheduled" and cond.status == "False":
            return str(cond.message)
    return ""


def _serving(core: client.CoreV1Api, namespace: str) -> list[client.V1Pod]:
    """The model's pods that are not terminating."""
    return [p for p in model_pods(core, namespace) if p.metadata.deletion_timestamp is None]


def test_a_model_is_served_by_its_rendered_pods_and_drains_without_failing_a_request(
    api: client.ApiClient,
    core: client.CoreV1Api,
    operator: OperatorProcess,
    namespace: str,
    real_node: RealNode,
    shoal_images: dict[str, str],
    model_claim: tuple[str, Path],
) -> None:
    """Served: each replica's fetch container linked the claim's files (but its stale
    config.pbtxt) beside the rendered config's mount point, Triton loaded them from the
    read-only claim, the probes made it Ready, and the model's Service answers. Then
    graceful drain: a tenant sends steadily through the Service, a new connection per
    request, while the model is scaled down from two replicas to one and then rolled by
    a change of its config. A leaving replica's pre-stop pause keeps it serving until
    kube-proxy has taken it out of the Service; only then does tritonserver get SIGTERM
    and stop listening. Not one request fails."""
    shoal = Shoal(api)
    claim, _ = model_claim
    with model_on_real_node(api, namespace, real_node, f"pvc://{claim}/linear", replicas=2) as pool:
        pods = wait_for(
            "two replicas Ready",
            lambda: _serving(core, namespace),
            lambda pods: len(pods) == 2 and all(pod_ready(p) for p in pods),
            timeout=240,
        )
        assert condition(wait_ready(shoal, namespace, "linear"), "Ready")["status"] == "True"
        for pod in pods:
            assert pod.spec.node_name == real_node.name
            [fetch] = pod.status.init_container_statuses or []
            assert fetch.name == FETCH_CONTAINER
            assert fetch.image == shoal_images["fetch"]
            assert fetch.state.terminated.exit_code == 0
            [triton] = pod.status.container_statuses or []
            assert triton.name == SERVING_CONTAINER
            assert triton.ready
            assert triton.restart_count == 0
            # Not copied: linked, and Triton reads the claim itself, read-only.
            name = str(pod.metadata.name)
            log = core.read_namespaced_pod_log(name, namespace, container=FETCH_CONTAINER)
            assert "linked from the claim: 1\n" in log, log
            [serving] = pod.spec.containers
            reads = [
                (m.mount_path, m.read_only)
                for m in serving.volume_mounts or []
                if m.name == "model-source"
            ]
            assert reads == [("/models/.source", True)]

        # Through the model's Service, as a tenant without a gateway reaches it
        # (kube-proxy, nftables).
        service = core.read_namespaced_service("linear", namespace)
        url = f"http://{service.spec.cluster_ip}:8000"
        served = httpx.get(f"{url}/v2/models/linear/config", timeout=10).json()
        assert served["backend"] == "python", "the rendered config.pbtxt won over the stale one"
        assert served["dynamic_batching"]["max_queue_delay_microseconds"] == 2000
        reply = httpx.post(url + INFER, json=BODY, timeout=10)
        assert reply.status_code == 200, reply.text
        assert reply.json()["outputs"][0]["data"] == [0, 1, 2, 3]
        success = 'nv_inference_request_success{model="linear",version="1"} 1\n'
        answered_by = [
            pod.metadata.name
            for pod in pods
            if success in httpx.get(f"http://{pod.status.pod_ip}:8002/metrics", timeout=10).text
        ]
        assert len(answered_by) == 1, "one replica counted the one request"

        load_env = {"REQUESTS": "1", "SECONDS": "600", "THREADS": "4", "KEEPALIVE": "0"}
        load_pod = tenant_pod(
            real_node,
            shoal_images["operator"],
            url,
            pool,
            name="drain-load",
            script=LOAD_SCRIPT,
            env=load_env,
        )
        create_from_dict(api, load_pod, namespace=namespace)

        def answered() -> int:
            tally = load_tally(str(core.read_namespaced_pod_log("drain-load", namespace)))
            return sum(tally["outcomes"].values())

        wait_for("the load to be answered", answered, lambda n: n > 0, timeout=90)
        before = {str(p.metadata.name) for p in _serving(core, namespace)}

        # Scaled down: the HPA's ceiling becomes 1 and one replica leaves.
        scaling = {"minReplicas": 1, "maxReplicas": 1}
        shoal.patch("InferenceModel", "linear", {"spec": {"scaling": scaling}}, namespace)
        wait_for(
            "one replica left",
            lambda: model_pods(core, namespace),
            lambda pods: len(pods) == 1,
            timeout=120,
        )
        # Rolled: the model's config changes, a new replica comes up, the old one leaves.
        config = {"parameters": {"base_ms": "2", "per_item_ms": "0.1"}}
        shoal.patch("InferenceModel", "linear", {"spec": {"model": config}}, namespace)
        wait_for(
            "the replica replaced by one with the new config",
            lambda: model_pods(core, namespace),
            lambda pods: (
                len(pods) == 1 and str(pods[0].metadata.name) not in before and pod_ready(pods[0])
            ),
            timeout=240,
        )
        # Some answers from the new replica alone, then the whole tally.
        settled = answered()
        wait_for("answers after the roll", answered, lambda n: n > settled + 100, timeout=60)
        tally = load_tally(str(core.read_namespaced_pod_log("drain-load", namespace)))
        core.delete_namespaced_pod("drain-load", namespace, grace_period_seconds=0)
        print(f"through a scale-down and a roll: {tally}")
        outcomes = tally["outcomes"]
        assert outcomes == {"200": sum(outcomes.values())}, tally
