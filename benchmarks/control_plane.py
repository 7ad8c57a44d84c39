"""Control-plane scale: N InferenceModels on a real local cluster, side by side with the
API server's own write ceiling.

For each N (100, 500, 1000):

0. the floor: on a fresh local cluster, the very objects the operator would create for
   N models, rendered by the same code and applied by a plain client (no reads, no
   status); the time until every Deployment has a pod available is what this machine's
   control plane needs for the workload itself, whoever drives it;

then a fresh local cluster (real etcd, kube-apiserver, controller-manager and scheduler;
simulated GPU nodes from KWOK) gets the CRDs, 50 tenant namespaces, 4 TenantPools and the
operator running as its least-privilege ServiceAccount, and in one run:

1. the write ceiling: ConfigMaps created as fast as 8 concurrent clients can, the API
   server's raw write throughput on this machine at this moment;
2. N models created at once, once the controller-manager's garbage collector watches
   InferenceModels (as in any cluster that has had the CRDs for a minute); the time
   until the operator has applied every model's children (``status.observedGeneration``
   set) and until every model is Ready (a Triton pod Running on a simulated node, so
   the controller-manager, scheduler and KWOK are in the figure too);
3. the operator's writes, counted by the API server's audit log (every create, update,
   patch and delete the ServiceAccount sent, events included), per model and as a rate
   against the ceiling;
4. a no-op resync: with everything converged, the writes during 1.5 resync periods
   (the target is 0), with the operator's reconcile counter showing the passes
   happened;
5. the operator's peak resident memory (VmHWM).

    python -m benchmarks.control_plane [--sizes 100,500,1000]
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import httpx
import yaml
from e2e.cluster import local
from e2e.install import install_crds, kubectl_for, operator_kubeconfig
from e2e.linear_model import linear_model
from e2e.operator import running_operator

from shoal.api.inferencemodel import InferenceModel
from shoal.api.tenantpool import TenantPool
from shoal.kube.paths import path_of
from shoal.render.desired import model_objects, pool_objects
from shoal.render.tenancy import tenant_objects

RESULTS = Path(__file__).resolve().parent / "results"
SIZES = (100, 500, 1000)
NAMESPACES = 50
POOLS = 4
CLIENTS = 8
CEILING_WRITES = 2000
RESYNC_SECONDS = 30.0
# Converged means no operator write for this long (pool usage is gathered for a second).
QUIET_SECONDS = 5.0
UPSTREAM_HPA_SYNC_PERIOD = "15s"
# Listing every model costs the API server too: poll no faster than this.
POLL_SECONDS = 2.0
OPERATOR_USER = "system:serviceaccount:shoal-system:shoal-operator"
# The controller-manager's garbage collector starts watching a new custom resource only
# at its next discovery of the API (every 30 s); until then every child naming an
# InferenceModel as owner costs it a GET of that model (448 at 100 models in one run).
# A cluster that has had the CRDs for longer than that pays nothing: the models are
# created once the controller-manager watches InferenceModels. Its informers run as
# the controller-manager itself, not as the collector's ServiceAccount.
CONTROLLER_MANAGER = "system:kube-controller-manager"
GC_SYNC_TIMEOUT_S = 120.0
GROUP_PATH = "/apis/shoal.dev/v1alpha1"
WRITE_VERBS = ("create", "update", "patch", "delete", "deletecollection")
# Simulated nodes for the models' pods, beside the cluster's own: enough GPUs and pod
# slots for 1,000 single-GPU replicas, so placement never limits the figure.
BENCH_NODES = 10
GPUS_PER_NODE = 128
PODS_PER_NODE = 200


def audit_policy() -> dict[str, Any]:
    """Log the operator's writes (metadata level) and the controller-manager's watch
    of InferenceModels, nothing else."""
    return {
        "apiVersion": "audit.k8s.io/v1",
        "kind": "Policy",
        "omitStages": ["RequestReceived", "Panic"],
        "rules": [
            {
                "level": "Metadata",
                "users": [OPERATOR_USER],
                "verbs": list(WRITE_VERBS),
                "omitStages": ["ResponseStarted"],
            },
            {
                # Its informer may list by a streaming watch: logged when it starts.
                "level": "Metadata",
                "users": [CONTROLLER_MANAGER],
                "verbs": ["list", "watch"],
                "resources": [{"group": "shoal.dev", "resources": ["inferencemodels"]}],
            },
            {"level": "None"},
        ],
    }


def bench_node(index: int) -> dict[str, Any]:
    capacity = {
        "cpu": "4096",
        "memory": "64Ti",
        "pods": str(PODS_PER_NODE),
        "ephemeral-storage": "100Ti",
        "nvidia.com/gpu": str(GPUS_PER_NODE),
    }
    name = f"bench-gpu-{index}"
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {
                "type": "kwok",
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "shoal.dev/node-group": "bench-gpu",
                "nvidia.com/gpu.present": "true",
                "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB",
            },
            "annotations": {"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0"},
        },
        "spec": {},
        "status": {"capacity": capacity, "allocatable": capacity},
    }


def namespace_names() -> list[str]:
    return [f"bench-{i:02d}" for i in range(NAMESPACES)]


def pool_of(namespace_index: int) -> str:
    return f"pool-{namespace_index % POOLS}"


def pools() -> list[dict[str, Any]]:
    """Half shared, half dedicated; each holds every POOLS-th namespace."""
    names = namespace_names()
    docs = []
    for p in range(POOLS):
        docs.append(
            {
                "apiVersion": "shoal.dev/v1alpha1",
                "kind": "TenantPool",
                "metadata": {"name": f"pool-{p}"},
                "spec": {
                    "isolation": "Shared" if p % 2 == 0 else "Dedicated",
                    "tenants": {"namespaces": names[p::POOLS]},
                    "placement": {"nodeSelector": {"shoal.dev/node-group": "bench-gpu"}},
                    "quota": {"gpus": GPUS_PER_NODE * BENCH_NODES},
                    # The models' control plane alone: the plain client renders no
                    # gateway, so neither side has one (benchmarks.gateway measures it).
                    "gateway": {"enabled": False},
                },
            }
        )
    return docs


def model(index: int) -> dict[str, Any]:
    """Model ``index``: round-robin over the namespaces, one GPU per replica."""
    ns_index = index % NAMESPACES
    doc = linear_model(
        20,
        1,
        pool=pool_of(ns_index),
        namespace=namespace_names()[ns_index],
        gpus=1,
        scaling={"minReplicas": 1, "maxReplicas": 2},
    )
    doc["metadata"]["name"] = doc["spec"]["model"]["name"] = f"model-{index:04d}"
    doc["spec"]["runtime"].update({"cpu": "100m", "memory": "256Mi"})
    return doc


@dataclass
class Figures:
    models: int
    ceiling_writes_per_s: float
    applied_s: float
    ready_s: float
    operator_writes: int
    writes_per_model: float
    write_rate_per_s: float
    fraction_of_ceiling: float
    noop_window_s: float
    noop_reconciles: int
    noop_writes: int
    peak_rss_mb: float
    plain_client_applied_s: float
    plain_client_ready_s: float
    ready_vs_plain_client: float
    plain_client_applies_per_s: float
    fraction_of_plain_client_rate: float
    writes_by_resource: dict[str, int] = field(default_factory=dict)
    noop_writes_by_resource: dict[str, int] = field(default_factory=dict)
    # CPU seconds each process used from the models' creation until all were Ready, in
    # the operator's run and in the plain client's, and the cores they shared: the
    # runs are bound by the machine's CPU, so the difference is where the time goes.
    cpu_seconds_until_ready: dict[str, float] = field(default_factory=dict)
    plain_client_cpu_seconds_until_ready: dict[str, float] = field(default_factory=dict)
    cores: int = 0
    # Until Ready: the watch events the operator received (by kind, and whether they
    # called for a pass) and the passes it ran (by kind and result).
    watch_events_until_ready: dict[str, int] = field(default_factory=dict)
    passes_until_ready: dict[str, int] = field(default_factory=dict)


def parallel(
    cluster: local.LocalCluster,
    items: list[Any],
    work: Callable[[httpx.Client, Any], None],
    clients: int = CLIENTS,
    timeout: float = 30.0,
) -> float:
    """Runs ``work(http, item)`` over ``items`` from ``clients`` threads, each with its
    own keep-alive admin connection (requests time out after ``timeout`` seconds);
    returns the seconds taken."""
    chunks = [items[i::clients] for i in range(clients)]
    errors: list[BaseException] = []

    def run(chunk: list[Any]) -> None:
        try:
            with local.admin_client(cluster, timeout) as http:
                for item in chunk:
                    work(http, item)
        except BaseException as exc:  # surfaced below, in the calling thread
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(c,)) for c in chunks]
    began = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return time.monotonic() - began


def write_ceiling(cluster: local.LocalCluster, kubectl: Callable[..., str]) -> float:
    """ConfigMap creates per second from CLIENTS concurrent clients, each on its own
    keep-alive connection: the API server's (and etcd's) write throughput here."""
    kubectl("create", "namespace", "ceiling")

    def create(http: httpx.Client, i: int) -> None:
        body = {"metadata": {"name": f"cm-{i}"}, "data": {"k": "v" * 64}}
        http.post("/api/v1/namespaces/ceiling/configmaps", json=body).raise_for_status()

    seconds = parallel(cluster, list(range(CEILING_WRITES)), create)
    kubectl("delete", "namespace", "ceiling", "--wait=false")
    return CEILING_WRITES / seconds


def audit_events(audit_log: Path) -> Iterator[dict[str, Any]]:
    """The audit log's events so far; the API server may be writing the last line, so
    only complete ones."""
    if not audit_log.exists():
        return
    for line in audit_log.read_text().split("\n")[:-1]:
        yield json.loads(line)


def operator_writes(audit_log: Path) -> Counter[str]:
    """The operator's completed writes in the audit log, by verb and resource."""
    counts: Counter[str] = Counter()
    for event in audit_events(audit_log):
        if event.get("stage") != "ResponseComplete" or not _operator_write(event):
            continue
        ref = event.get("objectRef", {})
        resource = ref.get("resource", "?")
        if ref.get("subresource"):
            resource += "/" + ref["subresource"]
        counts[f"{event['verb']} {resource}"] += 1
    return counts


def _operator_write(event: dict[str, Any]) -> bool:
    return event["user"].get("username") == OPERATOR_USER and event["verb"] in WRITE_VERBS


def wait_for_garbage_collector(audit_log: Path) -> float:
    """Seconds until the controller-manager has listed or started watching
    InferenceModels (see CONTROLLER_MANAGER)."""
    began = time.monotonic()
    while time.monotonic() - began < GC_SYNC_TIMEOUT_S:
        if any(e["user"].get("username") == CONTROLLER_MANAGER for e in audit_events(audit_log)):
            return time.monotonic() - began
        time.sleep(1.0)
    raise RuntimeError(
        f"the controller-manager did not watch InferenceModels in {GC_SYNC_TIMEOUT_S} s"
    )


def quiet_total(audit_log: Path) -> int:
    """The operator's write count once it has written nothing for QUIET_SECONDS."""
    total = sum(operator_writes(audit_log).values())
    while True:
        time.sleep(QUIET_SECONDS)
        now = sum(operator_writes(audit_log).values())
        if now == total:
            return total
        total = now


def counters(metrics_url: str, name: str) -> dict[str, float]:
    """The operator's counter ``name`` by its label set (as written in the exposition)."""
    text = httpx.get(metrics_url, timeout=10).text
    return {
        line.rsplit(" ", 1)[0][len(name) :]: float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith(name + "{")
    }


def reconcile_count(metrics_url: str) -> float:
    return sum(counters(metrics_url, "shoal_reconciles_total").values())


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def cpu_by_process(cluster: local.LocalCluster, operator_pid: int | None) -> dict[str, float]:
    """CPU seconds so far of the cluster's processes, and of the operator if it runs."""
    state = cluster.read_state()
    assert state is not None
    own = {"shoal-operator": cpu_seconds(operator_pid)} if operator_pid is not None else {}
    return own | {name: cpu_seconds(pid) for name, pid in state.pids.items()}


def cpu_since(
    cluster: local.LocalCluster, operator_pid: int | None, before: dict[str, float]
) -> dict[str, float]:
    return {
        name: round(seconds - before[name], 1)
        for name, seconds in cpu_by_process(cluster, operator_pid).items()
    }


def peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("VmHWM missing from /proc")


def model_progress(http: httpx.Client) -> tuple[int, int]:
    """(models whose children are applied, models Ready)."""
    items = http.get(f"{GROUP_PATH}/inferencemodels").raise_for_status().json()["items"]
    applied = ready = 0
    for item in items:
        status = item.get("status") or {}
        if status.get("observedGeneration") == item["metadata"]["generation"]:
            applied += 1
        conditions = {c["type"]: c["status"] for c in status.get("conditions", [])}
        if conditions.get("Ready") == "True":
            ready += 1
    return applied, ready


@contextmanager
def fresh_cluster(
    work: Path, hpa_sync_period: str = UPSTREAM_HPA_SYNC_PERIOD
) -> Iterator[local.LocalCluster]:
    """A new local cluster with the benchmark's nodes and tenant namespaces, its API
    server writing the audit log the operator's writes are counted from. The HPA sync
    period is upstream's unless a smaller fleet can afford a shorter one."""
    work.mkdir(parents=True, exist_ok=True)
    policy = work / "audit-policy.yaml"
    policy.write_text(yaml.safe_dump(audit_policy()))
    # Upstream's HPA sync period (the test cluster's 5 s would have the controller
    # evaluate 200 HPAs a second at 1,000 models, which is not what clusters run).
    cluster = local.LocalCluster(
        root=work / "cluster", audit_policy=policy, hpa_sync_period=hpa_sync_period
    )
    local.up(cluster)
    try:
        kubectl = kubectl_for(cluster.kubeconfig)
        setup = work / "setup.yaml"
        namespaces = [
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
            for name in namespace_names()
        ]
        setup.write_text(
            yaml.safe_dump_all([*(bench_node(i) for i in range(BENCH_NODES)), *namespaces])
        )
        kubectl("apply", "--server-side", f"--filename={setup}")
        yield cluster
    finally:
        local.down(cluster)


def plain_stacks(n: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """What the operator would create for the pools and for N models, rendered by the
    same code but without owners: (pool objects, model objects)."""
    by_name = {p["metadata"]["name"]: TenantPool.model_validate(p) for p in pools()}
    shared = [
        obj
        for pool in by_name.values()
        for obj in [
            *pool_objects(pool),
            *(o for ns in pool.spec.tenants.namespaces for o in tenant_objects(pool, ns)),
        ]
    ]
    per_model = []
    for i in range(n):
        im = InferenceModel.model_validate(model(i))
        per_model.extend(model_objects(im, None, by_name[im.spec.pool]))
    return shared, per_model


def deployments_available(http: httpx.Client) -> int:
    items = http.get("/apis/apps/v1/deployments").raise_for_status().json()["items"]
    return sum(1 for d in items if (d.get("status") or {}).get("availableReplicas"))


@dataclass(frozen=True)
class Floor:
    """The plain client's run: seconds to applied and to Ready, the server-side applies
    per second it sustained, and the CPU seconds each cluster process used until Ready."""

    applied_s: float
    ready_s: float
    applies_per_s: float
    cpu_seconds: dict[str, float]


def plain_client_floor(n: int, work: Path) -> Floor:
    """The same objects applied by a plain client (CLIENTS threads, server-side apply,
    no reads, no status) on a fresh cluster, timed until every Deployment has a pod
    available. What this machine's control plane needs for the workload itself,
    whoever drives it."""
    shared, per_model = plain_stacks(n)
    # The same API server as the operator's (its audit policy logs only the operator).
    with fresh_cluster(work) as cluster, local.admin_client(cluster) as http:

        def apply(client: httpx.Client, doc: dict[str, Any]) -> None:
            client.patch(
                path_of(doc),
                params={"fieldManager": "bench", "force": "true"},
                headers={"Content-Type": "application/apply-patch+yaml"},
                content=json.dumps(doc),
            ).raise_for_status()

        parallel(cluster, shared, apply)
        cpu_before = cpu_by_process(cluster, None)
        began = time.monotonic()
        applied_s = parallel(cluster, per_model, apply)
        deadline = began + 600
        while deployments_available(http) < n:
            if time.monotonic() > deadline:
                raise RuntimeError(f"plain client: not all {n} Deployments available in 600 s")
            time.sleep(POLL_SECONDS)
        ready_s = time.monotonic() - began
        return Floor(
            applied_s, ready_s, len(per_model) / applied_s, cpu_since(cluster, None, cpu_before)
        )


def run_size(n: int, work: Path) -> Figures:
    floor = plain_client_floor(n, work / "floor")
    with fresh_cluster(work) as cluster:
        kubectl = kubectl_for(cluster.kubeconfig)
        install_crds(kubectl)
        sa_kubeconfig = operator_kubeconfig(cluster.kubeconfig, kubectl, work / "operator-sa")
        ceiling = write_ceiling(cluster, kubectl)
        pool_file = work / "pools.yaml"
        pool_file.write_text(yaml.safe_dump_all(pools()))
        kubectl("apply", "--server-side", f"--filename={pool_file}")

        audit_log = cluster.logs / "audit.log"
        with (
            running_operator(
                sa_kubeconfig, work / "operator.log", resync_seconds=RESYNC_SECONDS
            ) as operator,
            local.admin_client(cluster) as http,
        ):
            # The pools settle first: their writes are not the models'.
            before = quiet_total(audit_log)
            wait_for_garbage_collector(audit_log)

            def create(client: httpx.Client, doc: dict[str, Any]) -> None:
                ns = doc["metadata"]["namespace"]
                client.post(
                    f"{GROUP_PATH}/namespaces/{ns}/inferencemodels", json=doc
                ).raise_for_status()

            cpu_before = cpu_by_process(cluster, operator.pid)
            began = time.monotonic()
            parallel(cluster, [model(i) for i in range(n)], create)
            applied_s = ready_s = 0.0
            deadline = began + 600
            while time.monotonic() < deadline:
                applied, ready = model_progress(http)
                now = time.monotonic() - began
                if applied == n and not applied_s:
                    applied_s = now
                if ready == n:
                    ready_s = now
                    break
                time.sleep(POLL_SECONDS)
            else:
                raise RuntimeError(f"{ready} of {n} models Ready after 600 s")
            cpu = cpu_since(cluster, operator.pid, cpu_before)
            events = counters(operator.metrics_url, "shoal_watch_events_total")
            passes = counters(operator.metrics_url, "shoal_reconciles_total")
            # Converged: wait for the last status writes (Ready flips) to land.
            settled = quiet_total(audit_log)
            by_resource = operator_writes(audit_log)
            writes = settled - before
            reconciles_before = reconcile_count(operator.metrics_url)
            window = 1.5 * RESYNC_SECONDS
            time.sleep(window)
            noop_by_resource = operator_writes(audit_log) - by_resource
            noop_writes = sum(noop_by_resource.values())
            noop_reconciles = round(reconcile_count(operator.metrics_url) - reconciles_before)
            rss = peak_rss_mb(operator.pid)
    return Figures(
        models=n,
        ceiling_writes_per_s=round(ceiling, 1),
        applied_s=round(applied_s, 1),
        ready_s=round(ready_s, 1),
        operator_writes=writes,
        writes_per_model=round(writes / n, 2),
        write_rate_per_s=round(writes / ready_s, 1),
        fraction_of_ceiling=round(writes / ready_s / ceiling, 2),
        noop_window_s=window,
        noop_reconciles=noop_reconciles,
        noop_writes=noop_writes,
        peak_rss_mb=round(rss, 1),
        plain_client_applied_s=round(floor.applied_s, 1),
        plain_client_ready_s=round(floor.ready_s, 1),
        ready_vs_plain_client=round(ready_s / floor.ready_s, 2),
        plain_client_applies_per_s=round(floor.applies_per_s, 1),
        fraction_of_plain_client_rate=round(writes / ready_s / floor.applies_per_s, 2),
        writes_by_resource=dict(sorted(by_resource.items())),
        noop_writes_by_resource=dict(sorted(noop_by_resource.items())),
        cpu_seconds_until_ready=cpu,
        plain_client_cpu_seconds_until_ready=floor.cpu_seconds,
        cores=os.cpu_count() or 1,
        watch_events_until_ready={k: round(v) for k, v in sorted(events.items())},
        passes_until_ready={k: round(v) for k, v in sorted(passes.items())},
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--sizes",
        default=",".join(map(str, SIZES)),
        help="comma-separated model counts (default %(default)s)",
    )
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    local.ensure_binaries()
    print(
        f"{'models':>7} {'applied s':>9} {'ready s':>8} {'plain s':>8} {'writes/model':>12} "
        f"{'writes/s':>9} {'ceiling/s':>9} {'fraction':>8} {'no-op writes':>12} "
        f"{'peak MB':>8} {'CPU s':>6} {'plain CPU s':>11}",
        flush=True,
    )
    figures = []
    for n in sizes:
        with tempfile.TemporaryDirectory(prefix="shoal-bench-") as tmp:
            f = run_size(n, Path(tmp))
        figures.append(f)
        print(
            f"{f.models:>7} {f.applied_s:>9} {f.ready_s:>8} {f.plain_client_ready_s:>8} "
            f"{f.writes_per_model:>12} "
            f"{f.write_rate_per_s:>9} {f.ceiling_writes_per_s:>9} {f.fraction_of_ceiling:>8} "
            f"{f.noop_writes:>5} in {f.noop_reconciles:>4} {f.peak_rss_mb:>8} "
            f"{sum(f.cpu_seconds_until_ready.values()):>6.0f} "
            f"{sum(f.plain_client_cpu_seconds_until_ready.values()):>11.0f}",
            flush=True,
        )
    summary = {
        "namespaces": NAMESPACES,
        "pools": POOLS,
        "resync_seconds": RESYNC_SECONDS,
        "ceiling_clients": CLIENTS,
        "results": [asdict(f) for f in figures],
    }
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "control_plane.json").write_text(json.dumps(summary, indent=2) + "\n")


if __name__ == "__main__":
    main()
