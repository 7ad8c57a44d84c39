"""``shoal doctor``'s metrics checks against the real pipeline: Prometheus (Debian's),
prometheus-adapter registered as the custom metrics API, the HPA controller.

A Prometheus of the test's own is started without Shoal's rules (reported), reloaded
with the shipped rule files (no longer reported), then given a scrape target that is
down (reported). Its shoal-operator job scrapes the session's real operator. On the
session's pipeline, a model's HPA reads nothing until a series exists for its pod
(reported), then reads it (not reported).
"""

from __future__ import annotations

import signal
import subprocess
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from e2e.cluster.local import free_port
from e2e.cluster.target import Target
from e2e.monitoring import MONITORING, Prometheus, launch_prometheus, write_targets
from e2e.operator import OperatorProcess
from e2e.process import stop
from kubernetes import client

from shoal.api.inferencemodel import InferenceModel
from shoal.api.tenantpool import TenantPool
from shoal.doctor.checks import CUSTOM_METRICS
from shoal.doctor.findings import Status
from shoal.metrics.alerts import alerting_rules
from shoal.metrics.pipeline import kubernetes_scrape_configs, recording_rules
from shoal.render.autoscaler import GATEWAY_QUEUE_METRIC, QUEUE_METRIC, horizontal_autoscaler
from shoal.render.batching import effective_batching
from tests.support.doctor import doctor
from tests.support.shoal_objects import inference_model, shared_pool
from tests.support.wait import wait_for

RULE_FILES = [MONITORING / "prometheus-rules.yaml", MONITORING / "prometheus-alerts.yaml"]
RECORDING = [f"rule group {g['name']}" for g in recording_rules()["groups"]]
ALERTS = [f"rule group {g['name']}" for g in alerting_rules()["groups"]]
JOBS = [c["job_name"] for c in kubernetes_scrape_configs()]


@dataclass
class BarePrometheus:
    """Debian's prometheus with Shoal's three scrape jobs (file_sd targets) and the
    rule files given; reloaded on SIGHUP when they change."""

    workdir: Path
    port: int = 0
    proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def targets(self, job: str) -> Path:
        return self.workdir / f"{job}.json"

    def configure(self, rule_files: list[Path]) -> None:
        config = {
            "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
            "rule_files": [str(f) for f in rule_files],
            "scrape_configs": [
                {
                    "job_name": job,
                    "honor_labels": job == "shoal-operator",
                    "file_sd_configs": [
                        {"files": [str(self.targets(job))], "refresh_interval": "1s"}
                    ],
                }
                for job in JOBS
            ],
        }
        (self.workdir / "prometheus.yml").write_text(yaml.safe_dump(config))
        if self.proc is not None:
            self.proc.send_signal(signal.SIGHUP)

    def start(self) -> BarePrometheus:
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        for job in JOBS:
            write_targets(self.targets(job), [])
        self.configure([])
        self.proc = launch_prometheus(self.workdir, self.port)
        return self

    def api(self, path: str) -> dict[str, Any]:
        data: dict[str, Any] = httpx.get(f"{self.url}{path}", timeout=5).json()["data"]
        return data


@pytest.fixture
def bare_prometheus(tmp_path: Path) -> Iterator[BarePrometheus]:
    prometheus = BarePrometheus(tmp_path / "prometheus").start()
    yield prometheus
    if prometheus.proc:
        stop(prometheus.proc)


def test_prometheus_without_shoals_rules_is_reported_and_with_them_it_is_not(
    bare_prometheus: BarePrometheus,
    kube_target: Target,
    operator: OperatorProcess,
    namespace: str,
) -> None:
    prometheus = bare_prometheus
    host = operator.metrics_url.removeprefix("http://").split("/", 1)[0]
    write_targets(prometheus.targets("shoal-operator"), [{"targets": [host], "labels": {}}])
    wait_for(
        "Prometheus to scrape the operator",
        lambda: prometheus.api("/api/v1/targets")["activeTargets"],
        lambda targets: any(t["health"] == "up" for t in targets),
        timeout=30,
    )
    # --namespace: a namespace without models, so no model pods need scraping.
    where = f"--namespace={namespace}"

    status, found = doctor(kube_target, "prometheus", where, prometheus=prometheus.url)
    assert status == 1
    for name in RECORDING:
        assert found[name]["status"] == Status.FAIL, found[name]
        assert "monitoring.prometheusRule.enabled=true" in found[name]["fix"]
    for name in ALERTS:
        assert found[name]["status"] == Status.WARN, found[name]
    assert found["scrape job shoal-operator"] == {
        "check": "prometheus",
        "name": "scrape job shoal-operator",
        "status": Status.OK,
        "message": "1 targets up",
        "fix": "",
    }

    prometheus.configure(RULE_FILES)
    wait_for(
        "Prometheus to load the shipped rule files",
        lambda: prometheus.api("/api/v1/rules")["groups"],
        lambda groups: len(groups) == len(RECORDING) + len(ALERTS),
        timeout=30,
    )
    status, found = doctor(kube_target, "prometheus", where, prometheus=prometheus.url)
    assert status == 0, found
    assert {found[name]["status"] for name in RECORDING + ALERTS} == {Status.OK}

    # A model pod Prometheus cannot reach (nothing listens on the port).
    dead = f"127.0.0.1:{free_port()}"
    write_targets(
        prometheus.targets("shoal-triton"),
        [{"targets": [dead], "labels": {"namespace": namespace, "pod": "gone"}}],
    )
    wait_for(
        "the dead target to be scraped",
        lambda: prometheus.api("/api/v1/targets")["activeTargets"],
        lambda targets: any(t["health"] == "down" for t in targets),
        timeout=30,
    )
    status, found = doctor(kube_target, "prometheus", where, prometheus=prometheus.url)
    assert status == 1
    down = found["scrape job shoal-triton"]
    assert down["status"] == Status.FAIL
    assert down["message"].startswith(f"1 of 1 targets down ({dead}): ")
    assert "connection refused" in down["message"]


def test_an_unreachable_prometheus_is_reported(kube_target: Target, namespace: str) -> None:
    nowhere = f"http://127.0.0.1:{free_port()}"
    status, found = doctor(
        kube_target, "prometheus", f"--namespace={namespace}", prometheus=nowhere
    )
    assert status == 1
    assert found[f"Prometheus {nowhere}"]["message"].startswith("cannot be queried: ")


def test_the_pipelines_prometheus_has_the_recording_rules_but_not_the_alerts(
    pipeline: Prometheus, kube_target: Target, namespace: str
) -> None:
    """The session's pipeline loads prometheus-rules.yaml alone (e2e/monitoring.py)."""
    _, found = doctor(
        kube_target, "prometheus", f"--namespace={namespace}", prometheus=pipeline.url
    )
    assert {found[name]["status"] for name in RECORDING} == {Status.OK}
    assert {found[name]["status"] for name in ALERTS} == {Status.WARN}
    assert "prometheus-alerts.yaml" in found[ALERTS[0]]["fix"]


class QueueExporter(BaseHTTPRequestHandler):
    """Triton's queue-depth gauge, at 0: a model pod's series without a Triton."""

    def do_GET(self) -> None:
        body = b'nv_inference_pending_request_count{model="m",version="1"} 0\n'
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *_: Any) -> None:
        pass


@pytest.fixture
def exporter() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), QueueExporter)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def as_body(obj: dict[str, Any]) -> Any:
    """A JSON object for the typed client's create calls, which send a dict as it is."""
    return obj


def test_an_hpa_reads_its_metrics_once_the_adapter_serves_them(
    pipeline: Prometheus,
    api: client.ApiClient,
    kube_target: Target,
    namespace: str,
    exporter: str,
) -> None:
    """Shoal's rendered HPA for a model, and its Deployment (a KWOK pod): with no
    series for the pod the doctor lists the HPA; with one (scraped under the pod's
    name, through the shipped rules and adapter) the HPA reads it, and so does the
    doctor."""
    body = inference_model("queued", "pool")
    body["metadata"]["namespace"] = namespace
    model = InferenceModel.model_validate(body)
    pool = TenantPool.model_validate(shared_pool("pool", [namespace])).spec
    hpa = horizontal_autoscaler(model, effective_batching(model, None), pool)
    selector = {"shoal.dev/model": "queued"}
    pod_spec = {"containers": [{"name": "triton", "image": "triton.invalid/none"}]}
    deployment = {
        "metadata": {"name": "queued", "labels": hpa["metadata"]["labels"]},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": selector},
            "template": {"metadata": {"labels": selector}, "spec": pod_spec},
        },
    }
    client.AppsV1Api(api).create_namespaced_deployment(namespace, as_body(deployment))
    autoscaling = client.AutoscalingV2Api(api)
    autoscaling.create_namespaced_horizontal_pod_autoscaler(namespace, as_body(hpa))

    def scaling_active() -> str | None:
        live = autoscaling.read_namespaced_horizontal_pod_autoscaler("queued", namespace)
        active = [c for c in live.status.conditions or [] if c.type == "ScalingActive"]
        return active[0].status if active else None

    wait_for("the HPA's first evaluation", scaling_active, lambda s: s is not None, timeout=30)
    where = f"--namespace={namespace}"
    # Other tests of the session may have left queue-depth series, which the adapter
    # then serves; without any, the HPA cannot read its metric and the doctor says why.
    if not pipeline.query("shoal:queue_depth:pod"):
        assert scaling_active() == "False"
        status, found = doctor(kube_target, "autoscalers", where)
        assert status == 1
        assert found[f"HPA {namespace}/queued"]["status"] == Status.FAIL
        status, found = doctor(kube_target, "metrics-api", where)
        assert status == 1
        unserved = found[f"metric {QUEUE_METRIC}"]
        assert unserved["status"] == Status.FAIL
        assert f"HPAs reading it: {namespace}/queued" in unserved["message"]
        assert "shoal:queue_depth:pod" in unserved["fix"]

    pod = wait_for(
        "the model's pod",
        lambda: (
            client.CoreV1Api(api)
            .list_namespaced_pod(namespace, label_selector="shoal.dev/model=queued")
            .items
        ),
        lambda pods: len(pods) == 1,
        timeout=30,
    )[0].metadata.name
    labels = {"namespace": namespace, "pod": pod, "inferencemodel": "queued"}
    targets = pipeline.targets_file_for(namespace, "queued")
    write_targets(targets, [{"targets": [exporter], "labels": labels}])
    try:
        wait_for(
            "the HPA to read its metrics through the adapter",
            scaling_active,
            lambda s: s == "True",
            timeout=60,
        )
        status, found = doctor(kube_target, "autoscalers", where)
        assert status == 0, found
        assert (
            found["Shoal's HPAs"]["message"]
            == "1 of 1 HPAs read their metrics (ScalingActive=True)"
        )
        status, found = doctor(kube_target, "metrics-api", where)
        assert status == 0, found
        assert found[f"APIService v1beta2.{CUSTOM_METRICS}"]["status"] == Status.OK
        for metric in (QUEUE_METRIC, GATEWAY_QUEUE_METRIC):
            assert found[f"metric {metric}"]["status"] == Status.OK
    finally:
        targets.unlink(missing_ok=True)
