"""The real metrics pipeline around the local cluster: Prometheus, prometheus-adapter
registered as the custom metrics API, and real tritonserver processes standing for a
model's pods.

KWOK pods run nothing, so :class:`PodBackers` starts one real tritonserver per Running
pod of a model (on 127.0.0.1, with the model's rendered config) and tells Prometheus,
through a file_sd target file, to scrape it under that pod's namespace and name. The
HPA controller then reads real queue depths, through the real adapter, and scales the
Deployment; KWOK starts the new pods, and the backers start their servers.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import yaml
from kubernetes import client

from e2e import triton
from e2e.cluster.local import free_port
from e2e.process import stop, wait_http
from e2e.triton_repo import add_model, for_cpu

REPO = Path(__file__).resolve().parent.parent
MONITORING = REPO / "manifests" / "monitoring"
SCRAPE_INTERVAL = "2s"
ADAPTER_VALUES = MONITORING / "prometheus-adapter-values.yaml"


def adapter_config_from_chart_values(values: dict[str, Any]) -> dict[str, Any]:
    """The adapter's config.yaml as the prometheus-community/prometheus-adapter chart's
    ConfigMap template writes it from ``values`` (its ``rules.custom`` under ``rules:``,
    after its own default rules when ``rules.default`` is true, which Shoal's values turn
    off; external and resource rules, which Shoal's values leave empty, after). The
    chart itself is not installed here (no chart registry): this is its template's
    logic, so that the rig's adapter runs what the documented install runs."""
    rules = values.get("rules") or {}
    if rules.get("default"):
        raise ValueError("the chart's default rules are not mirrored here: set rules.default")
    config: dict[str, Any] = {}
    if rules.get("custom"):
        config["rules"] = list(rules["custom"])
    if rules.get("external"):
        config["externalRules"] = list(rules["external"])
    if rules.get("resource"):
        config["resourceRules"] = rules["resource"]
    return config


def launch_prometheus(workdir: Path, port: int) -> subprocess.Popen[bytes]:
    """Debian's prometheus on ``workdir``/prometheus.yml, listening on 127.0.0.1:``port``,
    its data and log in ``workdir``; returns once it is ready."""
    log = workdir / "prometheus.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [
                "prometheus",
                f"--config.file={workdir / 'prometheus.yml'}",
                f"--storage.tsdb.path={workdir / 'data'}",
                f"--web.listen-address=127.0.0.1:{port}",
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    wait_http(f"http://127.0.0.1:{port}/-/ready", "prometheus", proc, log)
    return proc


@dataclass
class Prometheus:
    """Debian's prometheus with Shoal's recording rules and a file_sd scrape job."""

    workdir: Path
    port: int = 0
    proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def targets_file(self) -> Path:
        return self.workdir / "triton-targets.json"

    @property
    def model_targets_dir(self) -> Path:
        """One target file per model (``targets_file_for``), for backers of several
        models at once; scraped by the same job as ``targets_file``."""
        return self.workdir / "triton-targets.d"

    def targets_file_for(self, namespace: str, model: str) -> Path:
        return self.model_targets_dir / f"{namespace}_{model}.json"

    @property
    def gateway_targets_file(self) -> Path:
        """The pools' gateways (e2e/gateway_pods.py), labelled with their pool."""
        return self.workdir / "gateway-targets.json"

    @property
    def operator_targets_file(self) -> Path:
        """Operators whose own series (predictive scaling's) name their models: scraped
        with ``honor_labels``, as the shipped shoal-operator job does."""
        return self.workdir / "operator-targets.json"

    def scrape_operator(self, metrics_url: str) -> None:
        """Scrape one operator's metrics endpoint (``http://host:port/metrics``)."""
        host = metrics_url.removeprefix("http://").split("/", 1)[0]
        write_targets(self.operator_targets_file, [{"targets": [host], "labels": {}}])

    def start(self) -> Prometheus:
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.targets_file.write_text("[]")
        self.model_targets_dir.mkdir(exist_ok=True)
        self.gateway_targets_file.write_text("[]")
        self.operator_targets_file.write_text("[]")
        config = {
            "global": {"scrape_interval": SCRAPE_INTERVAL, "evaluation_interval": SCRAPE_INTERVAL},
            "rule_files": [str(MONITORING / "prometheus-rules.yaml")],
            "scrape_configs": [
                {
                    "job_name": job,
                    "file_sd_configs": [
                        {"files": [str(f) for f in targets], "refresh_interval": "1s"}
                    ],
                }
                for job, targets in (
                    ("shoal-triton", (self.targets_file, self.model_targets_dir / "*.json")),
                    ("shoal-gateway", (self.gateway_targets_file,)),
                )
            ]
            + [
                {
                    "job_name": "shoal-operator",
                    "honor_labels": True,
                    "file_sd_configs": [
                        {"files": [str(self.operator_targets_file)], "refresh_interval": "1s"}
                    ],
                }
            ],
        }
        (self.workdir / "prometheus.yml").write_text(yaml.safe_dump(config))
        self.proc = launch_prometheus(self.workdir, self.port)
        return self

    def query(self, promql: str) -> list[dict[str, Any]]:
        reply = httpx.get(f"{self.url}/api/v1/query", params={"query": promql}, timeout=5)
        result: list[dict[str, Any]] = reply.json()["data"]["result"]
        return result

    def stop(self) -> None:
        if self.proc:
            stop(self.proc)


@dataclass
class MetricsAdapter:
    """prometheus-adapter serving custom.metrics.k8s.io, registered with the cluster.

    The APIService points at a Service of type ExternalName naming 127.0.0.1 (an
    Endpoints object may not hold a loopback address)."""

    binary: Path
    kubeconfig: Path
    prometheus_url: str
    workdir: Path
    port: int = 0
    proc: subprocess.Popen[bytes] | None = None
    namespace: str = "shoal-monitoring"

    def start(self) -> MetricsAdapter:
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        # The config the documented install (the community chart with Shoal's values)
        # gives the adapter.
        config = self.workdir / "config.yaml"
        values = yaml.safe_load(ADAPTER_VALUES.read_text())
        config.write_text(yaml.safe_dump(adapter_config_from_chart_values(values)))
        log = self.workdir / "adapter.log"
        with log.open("wb") as out:
            self.proc = subprocess.Popen(
                [
                    str(self.binary),
                    f"--prometheus-url={self.prometheus_url}",
                    f"--config={config}",
                    f"--lister-kubeconfig={self.kubeconfig}",
                    f"--authentication-kubeconfig={self.kubeconfig}",
                    f"--authorization-kubeconfig={self.kubeconfig}",
                    "--bind-address=127.0.0.1",
                    f"--secure-port={self.port}",
                    f"--cert-dir={self.workdir / 'certs'}",
                    "--metrics-relist-interval=5s",
                    "--v=1",
                ],
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        wait_http(
            f"https://127.0.0.1:{self.port}/healthz",
            "prometheus-adapter",
            self.proc,
            log,
            verify=False,
        )
        self._register()
        return self

    def _kubectl(self, *args: str, stdin: str | None = None) -> None:
        subprocess.run(
            [str(self.binary.parent / "kubectl"), f"--kubeconfig={self.kubeconfig}", *args],
            input=stdin,
            check=True,
            capture_output=True,
            text=True,
        )

    def _register(self) -> None:
        service = {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "prometheus-adapter", "namespace": self.namespace},
            "spec": {
                "type": "ExternalName",
                "externalName": "127.0.0.1",
                "ports": [{"name": "https", "port": self.port}],
            },
        }
        api_service = {
            "apiVersion": "apiregistration.k8s.io/v1",
            "kind": "APIService",
            "metadata": {"name": "v1beta2.custom.metrics.k8s.io"},
            "spec": {
                "group": "custom.metrics.k8s.io",
                "version": "v1beta2",
                "service": {
                    "namespace": self.namespace,
                    "name": "prometheus-adapter",
                    "port": self.port,
                },
                "insecureSkipTLSVerify": True,
                "groupPriorityMinimum": 100,
                "versionPriority": 100,
            },
        }
        namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": self.namespace}}
        docs = yaml.safe_dump_all([namespace, service, api_service])
        self._kubectl("apply", "--server-side", "--force-conflicts", "-f", "-", stdin=docs)

    def unregister(self) -> None:
        self._kubectl("delete", "apiservice", "v1beta2.custom.metrics.k8s.io", "--ignore-not-found")

    def stop(self) -> None:
        self.unregister()
        if self.proc:
            stop(self.proc)


@dataclass
class PodBackers:
    """One real tritonserver per Running pod of a model, scraped under the pod's name.

    ``own_targets``: list them in the model's own target file rather than the shared one,
    which holds one model's backers at a time."""

    core: client.CoreV1Api
    namespace: str
    model: str
    repository: Path
    prometheus: Prometheus
    workdir: Path
    own_targets: bool = False
    servers: dict[str, triton.TritonServer] = field(default_factory=dict)
    _stop: threading.Event = field(default_factory=threading.Event)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _thread: threading.Thread | None = None

    @classmethod
    def for_rendered(
        cls,
        core: client.CoreV1Api,
        namespace: str,
        model: str,
        prometheus: Prometheus,
        workdir: Path,
        model_py: str = "linear_cost.py",
        own_targets: bool = False,
    ) -> PodBackers:
        """Started backers serving the config the operator rendered for ``model`` (its
        ConfigMap, as each pod would mount it, adapted for the CPU) with ``model_py``."""
        rendered = core.read_namespaced_config_map(f"{model}-model-config", namespace)
        repo = workdir / "repo"
        add_model(repo, for_cpu((rendered.data or {})["config.pbtxt"]), model_py=model_py)
        return cls(core, namespace, model, repo, prometheus, workdir / "pods", own_targets).start()

    def start(self) -> PodBackers:
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def http_urls(self) -> list[str]:
        with self._lock:
            return [s.http_url for s in self.servers.values()]

    def _run(self) -> None:
        while not self._stop.is_set():
            pods = self.core.list_namespaced_pod(
                self.namespace, label_selector=f"shoal.dev/model={self.model}"
            ).items
            running: set[str] = set()
            for pod in pods:
                meta, status = pod.metadata, pod.status
                if meta and status and status.phase == "Running" and not meta.deletion_timestamp:
                    running.add(str(meta.name))
            for name in sorted(running - set(self.servers)):
                server = triton.start(self.repository, self.workdir / name, timeout=120)
                with self._lock:
                    self.servers[name] = server
            for name in sorted(set(self.servers) - running):
                with self._lock:
                    server = self.servers.pop(name)
                server.stop()
            self._write_targets()
            self._stop.wait(1.0)

    def _write_targets(self) -> None:
        with self._lock:
            targets = [
                {
                    "targets": [f"127.0.0.1:{s.metrics_port}"],
                    "labels": {
                        "namespace": self.namespace,
                        "pod": pod,
                        "inferencemodel": self.model,
                    },
                }
                for pod, s in self.servers.items()
            ]
        path = (
            self.prometheus.targets_file_for(self.namespace, self.model)
            if self.own_targets
            else self.prometheus.targets_file
        )
        write_targets(path, targets)

    def stop(self) -> None:
        self._stop.set()
        if self._thread:
            self._thread.join(30)
        with self._lock:
            for server in self.servers.values():
                server.stop()
            self.servers.clear()


def write_targets(path: Path, targets: list[dict[str, Any]]) -> None:
    """A file_sd target file, replaced at once (Prometheus may read it any time)."""
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(targets))
    tmp.replace(path)


@dataclass
class LoadGenerator:
    """Closed-loop clients spreading requests over the backers (a round-robin balancer)."""

    urls: Callable[[], list[str]]
    model: str
    clients: int
    body: dict[str, Any]
    headers: dict[str, str] = field(default_factory=dict)
    sent: int = 0
    failed: int = 0
    _stop: threading.Event = field(default_factory=threading.Event)
    _threads: list[threading.Thread] = field(default_factory=list)

    def start(self) -> LoadGenerator:
        for i in range(self.clients):
            thread = threading.Thread(target=self._client, args=(i,), daemon=True)
            thread.start()
            self._threads.append(thread)
        return self

    def _client(self, index: int) -> None:
        turn = index
        with httpx.Client(timeout=30, headers=self.headers) as http:
            while not self._stop.is_set():
                urls = self.urls()
                if not urls:
                    time.sleep(0.2)
                    continue
                turn += 1
                url = urls[turn % len(urls)]
                try:
                    reply = http.post(f"{url}/v2/models/{self.model}/infer", json=self.body)
                except httpx.HTTPError:
                    self.failed += 1
                    continue
                self.sent += 1
                if reply.status_code != 200:
                    self.failed += 1

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(30)


@dataclass
class OpenLoopLoad:
    """Requests sent at set instants whatever the replies (an open loop: a slow server
    does not slow the offered load, as it does LoadGenerator's clients), round-robin
    over the backers.

    Each request is recorded as (the instant it was due, its latency from that instant,
    whether it got a 200): a request sent late, because the sender fell behind, counts
    its lateness too, so a saturated server cannot hide its queue by slowing the sender.
    """

    urls: Callable[[], list[str]]
    model: str
    body: dict[str, Any]
    offsets: Sequence[float]  # seconds after the start, ascending
    timeout: float = 60.0
    max_connections: int = 512
    records: list[tuple[float, float, bool]] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self, at: float | None = None) -> OpenLoopLoad:
        """Send request i at ``at + offsets[i]``; ``at`` is a time.monotonic() instant
        (now by default), so several loads can share one schedule's start."""
        begin = time.monotonic() if at is None else at
        self._thread = threading.Thread(target=asyncio.run, args=(self._run(begin),), daemon=True)
        self._thread.start()
        return self

    async def _run(self, begin: float) -> None:
        limits = httpx.Limits(
            max_connections=self.max_connections, max_keepalive_connections=self.max_connections
        )
        async with httpx.AsyncClient(timeout=self.timeout, limits=limits) as http:
            pending: set[asyncio.Task[None]] = set()
            for turn, offset in enumerate(self.offsets):
                due = begin + offset
                await asyncio.sleep(max(0.0, due - time.monotonic()))
                if self._stop.is_set():
                    break
                task = asyncio.create_task(self._send(http, turn, due))
                pending.add(task)
                task.add_done_callback(pending.discard)
            if pending:
                await asyncio.wait(pending)

    async def _send(self, http: httpx.AsyncClient, turn: int, due: float) -> None:
        urls = self.urls()
        ok = False
        if urls:
            url = urls[turn % len(urls)]
            try:
                reply = await http.post(f"{url}/v2/models/{self.model}/infer", json=self.body)
                ok = reply.status_code == 200
            except httpx.HTTPError:
                pass
        self.records.append((due, time.monotonic() - due, ok))

    @property
    def sent(self) -> int:
        return len(self.records)

    @property
    def failed(self) -> int:
        return sum(1 for _, _, ok in self.records if not ok)

    def join(self, timeout: float | None = None) -> None:
        """Until every request is sent and answered (or timed out)."""
        if self._thread:
            self._thread.join(timeout)

    def stop(self) -> None:
        """Send nothing more; wait for the replies of what was sent."""
        self._stop.set()
        self.join(self.timeout + 5)
