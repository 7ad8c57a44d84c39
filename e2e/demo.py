"""``make demo``: Shoal running against a cluster, from nothing.

Uses the cluster $KUBECONFIG points at when it is reachable; otherwise starts (or
reuses) the local one. Installs the CRDs and admission policy with server-side apply,
and the gateways' namespace and identity, then runs the operator in the foreground
until Ctrl-C. The local cluster keeps running afterwards; stop it with
``make cluster-down``.

On the local cluster the demo shows the whole loop on real pods. It starts the
cluster's real node (real-0), builds Shoal's images or finds them cached
(e2e/cluster/image_builds.py) and imports them there, starts Prometheus with Shoal's
scrape jobs and rules and prometheus-adapter as the cluster's custom metrics
API, and serves e2e/demo.yaml: the model's and the gateway's pods run on real-0, a
request goes through the gateway's Service, and ``python -m e2e.demo load`` drives the
model's HPA up and, after the cool-down, back to its warm pool.

``python -m e2e.demo load [--seconds N] [--clients N]``: closed-loop clients through
the demo pool's gateway with a tenant's token, a line of figures every 5 s.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import httpx
import yaml
from kubernetes import client

from e2e.cluster import image_builds, local
from e2e.cluster import node as node_mod
from e2e.cluster.local import ClusterError, ensure_binaries, free_port
from e2e.cluster.target import Target, resolve_target
from e2e.gateway_pods import service_account_token
from e2e.install import Kubectl, install_crds, kubectl_for
from e2e.linear_model import BODY
from e2e.model_store import host_volume, write_repository
from e2e.monitoring import MONITORING, MetricsAdapter, launch_prometheus, write_targets
from e2e.process import stop
from shoal.api.constants import GATEWAY_LABEL, MANAGED_BY, MANAGED_BY_LABEL, MODEL_LABEL
from shoal.render.gateway import DEFAULT_GATEWAY_NAMESPACE, audience, gateway_name

REPO = Path(__file__).resolve().parent.parent
OBJECTS = REPO / "e2e" / "demo.yaml"
GATEWAYS = REPO / "manifests" / "gateways"
GATEWAY_RIGHTS = REPO / "manifests" / "base" / "gateway-rights.yaml"
NAMESPACE, POOL, MODEL = "shoal-demo", "demo", "linear"
VOLUME = "shoal-demo-model-store"
CALLER = "caller"


def say(message: str) -> None:
    print(f"shoal demo: {message}", flush=True)


def _until(what: str, probe: Any, timeout: float = 300) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            value = probe()
        except (client.ApiException, httpx.HTTPError):
            value = None
        if value:
            return value
        time.sleep(1)
    raise TimeoutError(f"{what} did not happen within {timeout:.0f}s")


def _model(custom: client.CustomObjectsApi) -> dict[str, Any]:
    model: dict[str, Any] = custom.get_namespaced_custom_object(  # type: ignore[assignment]
        "shoal.dev", "v1alpha1", NAMESPACE, "inferencemodels", MODEL
    )
    return model


def _ready(obj: dict[str, Any]) -> bool:
    conditions = (obj.get("status") or {}).get("conditions") or []
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


def gateway_url(core: client.CoreV1Api) -> str:
    """The demo pool's gateway Service, as a client in the cluster (or on this machine,
    through kube-proxy) reaches it."""
    service = core.read_namespaced_service(gateway_name(POOL), DEFAULT_GATEWAY_NAMESPACE)
    assert service.spec is not None
    return f"http://{service.spec.cluster_ip}:8000"


# The shipped scrape jobs (manifests/monitoring/prometheus-scrape-config.yaml) keep the
# pods Shoal manages that carry one of these labels, and name the series after it.
SCRAPE_JOBS = {
    "shoal-triton": (MODEL_LABEL, "inferencemodel"),
    "shoal-gateway": (GATEWAY_LABEL, "pool"),
}


def pod_targets(pods: list[Any], selector: str, label: str) -> list[dict[str, Any]]:
    """file_sd target groups for the running pods that the shipped job keeps: Shoal's,
    with the ``selector`` label, at their port named ``metrics``; labelled as the job's
    relabelling labels them (namespace, pod, and ``label`` from ``selector``)."""
    groups = []
    for pod in pods:
        labels = pod.metadata.labels or {}
        if labels.get(MANAGED_BY_LABEL) != MANAGED_BY or not labels.get(selector):
            continue
        if pod.status.phase != "Running" or not pod.status.pod_ip:
            continue
        ports = [p for c in pod.spec.containers for p in c.ports or [] if p.name == "metrics"]
        groups += [
            {
                "targets": [f"{pod.status.pod_ip}:{port.container_port}"],
                "labels": {
                    "namespace": pod.metadata.namespace,
                    "pod": pod.metadata.name,
                    label: labels[selector],
                },
            }
            for port in ports
        ]
    return groups


@contextmanager
def monitoring(target: Target, workdir: Path) -> Iterator[str]:
    """Prometheus with Shoal's scrape jobs and recording rules, and prometheus-adapter
    serving them to the HPA controller; yields Prometheus' URL. Debian's Prometheus is
    built without Kubernetes service discovery: a loop here lists the pods every 2 s and
    writes the targets the shipped jobs would find (file_sd) - the one stand-in."""
    prom_dir = workdir / "prometheus"
    prom_dir.mkdir(parents=True)
    files = {job: prom_dir / f"{job}.json" for job in SCRAPE_JOBS}
    for path in files.values():
        path.write_text("[]")
    config = {
        "global": {"scrape_interval": "5s", "evaluation_interval": "5s"},
        "rule_files": [str(MONITORING / "prometheus-rules.yaml")],
        "scrape_configs": [
            {
                "job_name": job,
                "file_sd_configs": [{"files": [str(path)], "refresh_interval": "2s"}],
            }
            for job, path in files.items()
        ],
    }
    (prom_dir / "prometheus.yml").write_text(yaml.safe_dump(config))
    port = free_port()
    prometheus = launch_prometheus(prom_dir, port)
    url = f"http://127.0.0.1:{port}"
    adapter = MetricsAdapter(
        binary=ensure_binaries() / "prometheus-adapter",
        kubeconfig=target.kubeconfig,
        prometheus_url=url,
        workdir=workdir / "adapter",
    ).start()
    core = client.CoreV1Api(target.api_client())
    done = threading.Event()

    def discover() -> None:
        while not done.wait(2.0):
            try:
                pods = core.list_pod_for_all_namespaces().items
            except client.ApiException:
                continue
            for job, (selector, label) in SCRAPE_JOBS.items():
                write_targets(files[job], pod_targets(pods, selector, label))

    discovery = threading.Thread(target=discover, daemon=True)
    discovery.start()
    try:
        yield url
    finally:
        done.set()
        discovery.join(10)
        adapter.stop()
        stop(prometheus)


def model_store(cluster: local.LocalCluster, api: client.ApiClient) -> None:
    """The model's files in a directory of this machine, offered to real-0's pods as the
    hostPath PersistentVolume the demo's claim binds."""
    source = cluster.kubeconfig.parent / "demo-models"
    write_repository(source, MODEL)
    volume = host_volume(VOLUME, source, NAMESPACE, "model-store")
    try:
        client.CoreV1Api(api).create_persistent_volume(volume)  # type: ignore[arg-type]
    except client.ApiException as exc:
        if exc.status != 409:
            raise


def real_node_env(cluster: local.LocalCluster) -> dict[str, str]:
    """Start real-0 and put Shoal's images in its containerd; the operator's settings
    that place the pools' gateways there."""
    say("starting the real node real-0 (kubelet, containerd, kube-proxy)")
    node_mod.up(cluster)
    say("building Shoal's images, or finding them cached (the first time: about 8 minutes)")
    archives = image_builds.ensure_all()
    node_mod.import_archives(cluster, list(archives.values()))
    say(f"imported {', '.join(archives)} into real-0")
    selector = {node_mod.LABEL: "true"}
    toleration = {"key": node_mod.LABEL, "operator": "Equal", "value": "true"}
    return {
        "SHOAL_GATEWAY_NODE_SELECTOR": json.dumps(selector),
        "SHOAL_GATEWAY_TOLERATIONS": json.dumps([{**toleration, "effect": "NoSchedule"}]),
    }


def showcase(target: Target, kubectl: Kubectl) -> None:
    """Serve e2e/demo.yaml on real-0, send one request through the gateway, and print
    what to try next."""
    kubectl("apply", "--server-side", f"--filename={OBJECTS}")
    api = target.api_client()
    core, custom = client.CoreV1Api(api), client.CustomObjectsApi(api)
    say(f"applied {OBJECTS.relative_to(REPO)}; waiting for InferenceModel {MODEL} to be Ready")
    model = _until("the model to be Ready", lambda: _ready(_model(custom)) and _model(custom))
    url = _until("the gateway's Service", lambda: gateway_url(core))
    bearer = service_account_token(core, NAMESPACE, audience(POOL), CALLER, seconds=3600)
    path = f"/v2/models/{MODEL}/infer"

    def served() -> httpx.Response | None:
        reply = httpx.post(
            url + path, json=BODY, headers={"Authorization": f"Bearer {bearer}"}, timeout=10
        )
        return reply if reply.status_code == 200 else None

    reply = _until("a request through the gateway", served)
    refused = httpx.post(url + path, json=BODY, timeout=10)
    say(f"InferenceModel {MODEL} says its gateway URL is {model['status']['endpoints']['gateway']}")
    say(
        f"POST {url}{path} with the token of ServiceAccount {NAMESPACE}/{CALLER} -> "
        f"{reply.status_code} {json.dumps(reply.json()['outputs'][0]['data'])} "
        f"X-Request-ID {reply.headers.get('X-Request-ID')}"
    )
    say(f"the same without a token -> {refused.status_code}")
    kubectl_binary = shutil.which("kubectl") or str(ensure_binaries() / "kubectl")
    kube = f"{kubectl_binary} --kubeconfig={target.kubeconfig}"
    body = shlex.quote(json.dumps(BODY))
    say("try it yourself, from another shell:")
    print(
        f"  {kube} get pods -o wide -n {NAMESPACE}\n"
        f"  {kube} get pods -o wide -n {DEFAULT_GATEWAY_NAMESPACE}\n"
        f"  {kube} logs -n {NAMESPACE} deployment/{MODEL}\n"
        f"  {kube} logs -n {DEFAULT_GATEWAY_NAMESPACE} deployment/{gateway_name(POOL)} -c agent\n"
        f"  TOKEN=$({kube} create token {CALLER} -n {NAMESPACE} --audience {audience(POOL)})\n"
        f'  curl -s {url}{path} -H "Authorization: Bearer $TOKEN" -d {body}\n'
        f"  {kube} get im,hpa -n {NAMESPACE} -w     # QUEUE, P95 and the replicas\n"
        f"  {sys.executable} -m e2e.demo load --seconds 120   # the HPA scales up, then back",
        flush=True,
    )


def run_operator(target: Target, env: dict[str, str], served: bool) -> int:
    """The operator in the foreground until Ctrl-C (or SIGTERM); with ``served``, the
    demo's objects applied and shown."""
    shoal = Path(sys.executable).parent / "shoal"
    full_env = dict(os.environ, KUBECONFIG=str(target.kubeconfig), **env)
    full_env.setdefault("SHOAL_LIVENESS_ENDPOINT", "http://127.0.0.1:8080/healthz")
    operator = subprocess.Popen([str(shoal), "run"], env=full_env)
    say(f"operator started; in another shell: export KUBECONFIG={target.kubeconfig}")
    try:
        if served:
            try:
                showcase(target, kubectl_for(target.kubeconfig))
            except Exception as error:  # the operator keeps running regardless
                say(f"the demo's model did not get served: {error}")
        say("the operator runs until Ctrl-C")
        return operator.wait()
    except KeyboardInterrupt:
        return 0
    finally:
        stop(operator, grace=15)


def main() -> int:
    target = resolve_target()
    where = "local cluster" if target.local else "cluster from $KUBECONFIG"
    say(f"using the {where} ({target.kubeconfig})")
    kubectl = kubectl_for(target.kubeconfig)
    install_crds(kubectl)
    # The namespace the pools' gateways run in, their ServiceAccount, and the rights the
    # operator has there (the rest of manifests/base is the operator's own Deployment,
    # which this demo runs in the foreground instead).
    kubectl("apply", "--server-side", "--force-conflicts", "-k", str(GATEWAYS))
    kubectl("apply", "--server-side", "--force-conflicts", f"--filename={GATEWAY_RIGHTS}")
    say(f"CRDs, admission policy and {GATEWAYS.relative_to(REPO)} applied")
    # A supervisor's (or timeout's) SIGTERM stops the demo like Ctrl-C: Prometheus and
    # the adapter it started go with it instead of outliving it.
    signal.signal(signal.SIGTERM, lambda *_: signal.raise_signal(signal.SIGINT))
    env: dict[str, str] = {}
    with ExitStack() as stack:
        served = target.local
        if target.local:
            cluster = local.LocalCluster()
            try:
                env.update(real_node_env(cluster))
            except ClusterError as error:
                say(f"no real node, so no model served: {error}")
                served = False
        if served:
            model_store(cluster, target.api_client())
            workdir = Path(tempfile.mkdtemp(prefix="shoal-demo-"))
            env["SHOAL_PROMETHEUS_URL"] = stack.enter_context(monitoring(target, workdir))
            say(f"Prometheus at {env['SHOAL_PROMETHEUS_URL']}, prometheus-adapter registered")
        return run_operator(target, env, served)


def load(seconds: float, clients: int) -> int:
    """Closed-loop clients through the demo pool's gateway for ``seconds``."""
    target = resolve_target()
    core = client.CoreV1Api(target.api_client())
    url = gateway_url(core) + f"/v2/models/{MODEL}/infer"
    bearer = service_account_token(core, NAMESPACE, audience(POOL), CALLER, seconds=3600)
    counts: dict[str, int] = {}
    lock = threading.Lock()
    deadline = time.monotonic() + seconds
    say(f"{clients} clients sending to {url} for {seconds:.0f} s")

    def client_loop() -> None:
        headers = {"Authorization": f"Bearer {bearer}"}
        with httpx.Client(timeout=30, headers=headers) as http:
            while time.monotonic() < deadline:
                try:
                    outcome = str(http.post(url, json=BODY).status_code)
                except httpx.HTTPError as exc:
                    outcome = type(exc).__name__
                with lock:
                    counts[outcome] = counts.get(outcome, 0) + 1

    threads = [threading.Thread(target=client_loop, daemon=True) for _ in range(clients)]
    for t in threads:
        t.start()
    started, last = time.monotonic(), 0
    while any(t.is_alive() for t in threads):
        time.sleep(5)
        total = sum(counts.values())
        rate = (total - last) / 5
        last = total
        say(f"{time.monotonic() - started:4.0f} s: {rate:6.1f} req/s, answers so far {counts}")
    say("done; the model scales back to its warm pool after the 30 s cool-down")
    return 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command")
    load_args = sub.add_parser("load", help="send load through the demo's gateway")
    load_args.add_argument("--seconds", type=float, default=120)
    load_args.add_argument("--clients", type=int, default=16)
    args = parser.parse_args()
    if args.command == "load":
        sys.exit(load(args.seconds, args.clients))
    sys.exit(main())
