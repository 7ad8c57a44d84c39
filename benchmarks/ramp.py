"""Predictive scaling against queue depth alone, on the real HPA, under one rising ramp.

Two copies of one model run side by side on the local cluster, in two namespaces of one
TenantPool, behind the same metrics pipeline (the real Prometheus with the shipped rules,
the real prometheus-adapter, the real HPA controller, one real tritonserver per Running
pod, see e2e/monitoring.py) and one operator reading that Prometheus:

- ``predictive``: ``spec.scaling.predictive.enabled``, so its HPA has the operator's
  required-replicas metric beside the queue depth;
- ``queue_depth``: the same spec without it, so its HPA has the queue depth alone.

Both keep the default queue-depth target (a quarter of a batch), 1 to 4 replicas, and
receive the same open-loop load at the same time, so the machine's noise falls on both:
Poisson arrivals (one seeded list of instants, sent to each) at a low rate until the
pipeline reads both models and the forecast is published, then rising linearly to the
peak, then held there.

Figures, per model, with the ramp's start as time 0:

- enough replicas: the fewest replicas whose throughput covers the peak,
  ``ceil(peak / capacity)``, where capacity is what one tritonserver serving the same
  rendered config sustains at saturation (closed-loop clients, three batches' worth),
  measured in the same run beside the warm-up. Demand needs them once the offered rate
  passes what one replica fewer sustains (``demand_needs_them_at_s``);
- enough at: the first second the Deployment's replicas (the HPA's decision) are at
  least that many; serving at: the first second that many tritonservers answer (the
  decision plus the pods' start);
- P95 over the ramp and at the peak: client-side latency of every request due then,
  counted from the instant it was due;
- the replica timeline, and replica-seconds (what the replicas cost) over ramp and peak.

    python -m benchmarks.ramp

Needs the local cluster (it registers a metrics adapter on 127.0.0.1); starts it unless
it runs, and stops it afterwards unless it was running or SHOAL_KEEP_CLUSTER is set.
Writes benchmarks/results/ramp.json.
"""

from __future__ import annotations

import json
import math
import os
import platform
import random
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, cast

from e2e.cluster import local
from e2e.cluster.local import HPA_SYNC_PERIOD
from e2e.cluster.target import Target, resolve_target
from e2e.hpa import quantity, readings
from e2e.install import install_crds, kubectl_for, operator_kubeconfig
from e2e.linear_model import BODY, linear_model
from e2e.monitoring import (
    SCRAPE_INTERVAL,
    LoadGenerator,
    MetricsAdapter,
    OpenLoopLoad,
    PodBackers,
    Prometheus,
)
from e2e.operator import running_operator
from kubernetes import client

from e2e import triton
from shoal.reconcile.predictive import PREDICT_SECONDS
from shoal.render.autoscaler import QUEUE_METRIC, REQUIRED_REPLICAS_METRIC

RESULTS = Path(__file__).resolve().parent / "results"
GROUP, VERSION = "shoal.dev", "v1alpha1"
MODEL = "linear"
SCALERS = ("predictive", "queue_depth")
LABELS = {"predictive": "queue depth + forecast", "queue_depth": "queue depth alone"}

# The model: a fixed cost per batch plus a cost per item, batches of up to 4, so one
# replica sustains at most 4 / 140 ms = 28 req/s (about 25 with Triton's own overhead);
# slow enough that the whole ramp, for both models, stays within what a small machine's
# clients can send.
BASE_MS, PER_ITEM_MS = 100.0, 10.0
MAX_BATCH, QUEUE_DELAY = 4, "2ms"
MIN_REPLICAS, MAX_REPLICAS = 1, 4

# The load: the peak is about 2.5 replicas' worth, so three are enough, with a margin
# either side for the capacity this run measures.
LOW_RPS, PEAK_RPS = 5.0, 64.0
RAMP_S, HOLD_S = 150.0, 60.0
SEED = 14
# Warm-up: until both HPAs read the queue depth and the forecast is published (it needs
# arrival rates and some 200 batches to measure a replica), within these bounds.
MIN_WARMUP_S, MAX_WARMUP_S = 60.0, 120.0
# The capacity measurement: closed-loop clients keeping batches full.
CAPACITY_CLIENTS = 3 * MAX_BATCH
CAPACITY_SETTLE_S, CAPACITY_SECONDS = 3.0, 15.0
SAMPLE_SECONDS = 1.0
BUCKET_SECONDS = 15.0


@dataclass(frozen=True)
class RampPlan:
    """Offered load against time from the ramp's start: ``low_rps`` before it, rising
    linearly to ``peak_rps`` over ``ramp_s``, held for ``hold_s``, then nothing."""

    low_rps: float
    peak_rps: float
    ramp_s: float
    hold_s: float

    @property
    def end_s(self) -> float:
        return self.ramp_s + self.hold_s

    def rate(self, t: float) -> float:
        if t < 0:
            return self.low_rps
        if t < self.ramp_s:
            return self.low_rps + (self.peak_rps - self.low_rps) * t / self.ramp_s
        return self.peak_rps if t < self.end_s else 0.0


@dataclass(frozen=True)
class Sample:
    """One model at one instant (seconds from the ramp's start): the Deployment's
    replicas, the tritonservers answering for its pods, what its HPA last read (the
    queue depth per replica, the required replicas the operator published) and what
    the operator's status says of the forecast (predictive only)."""

    t: float
    replicas: int
    serving: int
    queue: float | None
    required: float | None
    forecast_rps: float | None = None
    capacity_rps: float | None = None


def arrivals(
    rate: Callable[[float], float], ceiling: float, start: float, end: float, seed: int
) -> list[float]:
    """Poisson arrival instants in ``[start, end)`` at ``rate(t)`` (never above
    ``ceiling``), by thinning: candidates at ``ceiling``, each kept with probability
    ``rate(t) / ceiling``. The same seed gives the same instants."""
    rng = random.Random(seed)
    out: list[float] = []
    t = start
    while True:
        t += rng.expovariate(ceiling)
        if t >= end:
            return out
        if rng.random() * ceiling < rate(t):
            out.append(t)


def replicas_needed(peak_rps: float, capacity_rps: float) -> int:
    """The fewest replicas whose throughput covers the peak (at least one)."""
    if capacity_rps <= 0:
        raise ValueError("capacity per replica must be positive")
    return max(1, math.ceil(peak_rps / capacity_rps - 1e-9))


def demand_exceeds_at(plan: RampPlan, rps: float) -> float | None:
    """When the offered rate first passes ``rps`` (seconds from the ramp's start; 0 if
    it already does), None if it never does."""
    if plan.low_rps > rps:
        return 0.0
    if plan.peak_rps <= rps:
        return None
    return plan.ramp_s * (rps - plan.low_rps) / (plan.peak_rps - plan.low_rps)


def first_reach(samples: Sequence[Sample], needed: int, count: str = "replicas") -> float | None:
    """Seconds from the ramp's start until ``count`` (replicas or serving) is at least
    ``needed``: 0 when it already was at the start, None when it never got there."""
    before = [s for s in samples if s.t <= 0]
    if before and getattr(before[-1], count) >= needed:
        return 0.0
    return next((s.t for s in samples if s.t > 0 and getattr(s, count) >= needed), None)


def replica_seconds(samples: Sequence[Sample], start: float, end: float) -> float:
    """The integral of the replica count over ``[start, end]``, each sample's count
    holding until the next sample."""
    total = 0.0
    ordered = sorted(samples, key=lambda s: s.t)
    for here, after in zip(ordered, [*ordered[1:], None], strict=True):
        lo = max(here.t, start)
        hi = min(after.t if after else end, end)
        if hi > lo:
            total += here.replicas * (hi - lo)
    return total


def percentile(values: Iterable[float], q: float) -> float | None:
    """The nearest-rank ``q``-th percentile (an observed value); None without values."""
    ordered = sorted(values)
    if not ordered:
        return None
    rank = max(1, math.ceil(q / 100 * len(ordered) - 1e-9))
    return ordered[rank - 1]


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds * 1000, 1)


def latency_figures(
    records: Sequence[tuple[float, float, bool]], start: float, end: float
) -> dict[str, Any]:
    """Requests due in ``[start, end)``: how many, how many failed, and the median and
    P95 of the answered ones (ms)."""
    due = [(latency, ok) for t, latency, ok in records if start <= t < end]
    answered = [latency for latency, ok in due if ok]
    return {
        "requests": len(due),
        "failed": len(due) - len(answered),
        "p50_ms": _ms(percentile(answered, 50)),
        "p95_ms": _ms(percentile(answered, 95)),
    }


def timeline(samples: Sequence[Sample]) -> list[list[float]]:
    """``[t, replicas, serving]`` at the first sample and at every change."""
    out: list[list[float]] = []
    for s in samples:
        if not out or (out[-1][1], out[-1][2]) != (s.replicas, s.serving):
            out.append([round(s.t, 1), s.replicas, s.serving])
    return out


def buckets(
    plan: RampPlan,
    records: Sequence[tuple[float, float, bool]],
    samples: Sequence[Sample],
    width: float,
) -> list[dict[str, Any]]:
    """Ramp and peak in slices of ``width`` seconds: the offered rate in the middle, the
    latencies, the last replica counts, the HPA's mean queue reading (per replica), and
    the last required replicas, forecast and capacity per replica the operator gave."""
    out = []
    start = 0.0
    while start < plan.end_s - 1e-9:
        end = min(start + width, plan.end_s)
        inside = [s for s in samples if start <= s.t < end]
        queues = [s.queue for s in inside if s.queue is not None]

        def last(values: Iterable[float | None]) -> float | None:
            known = [v for v in values if v is not None]
            return known[-1] if known else None

        out.append(
            {
                "t": start,
                "offered_rps": round(plan.rate((start + end) / 2), 1),
                **latency_figures(records, start, end),
                "replicas": inside[-1].replicas if inside else None,
                "serving": inside[-1].serving if inside else None,
                "queue_per_replica": round(sum(queues) / len(queues), 2) if queues else None,
                "required_replicas": last(s.required for s in inside),
                "forecast_rps": last(s.forecast_rps for s in inside),
                "capacity_rps": last(s.capacity_rps for s in inside),
            }
        )
        start = end
    return out


def model_figures(
    plan: RampPlan,
    needed: int,
    records: Sequence[tuple[float, float, bool]],
    samples: Sequence[Sample],
) -> dict[str, Any]:
    """One model's figures (times relative to the ramp's start)."""
    at_start = [s for s in samples if s.t <= 0]
    reached = first_reach(samples, needed)
    serving = first_reach(samples, needed, "serving")
    return {
        "replicas_at_ramp_start": at_start[-1].replicas if at_start else None,
        "enough_at_s": None if reached is None else round(reached, 1),
        "serving_enough_at_s": None if serving is None else round(serving, 1),
        "peak_replicas": max((s.replicas for s in samples if s.t >= 0), default=None),
        "ramp": latency_figures(records, 0.0, plan.ramp_s),
        "peak": latency_figures(records, plan.ramp_s, plan.end_s),
        "replica_seconds": round(replica_seconds(samples, 0.0, plan.end_s)),
        "timeline": timeline(samples),
        "buckets": buckets(plan, records, samples, BUCKET_SECONDS),
    }


def _seconds(value: float | None) -> str:
    return "not reached" if value is None else f"{value:.0f}"


def _number(value: float | None) -> str:
    return "-" if value is None else f"{value:.0f}"


def ramp_lines(data: dict[str, Any]) -> list[str]:
    """A short paragraph and a table of the run's figures, for docs/benchmarks.md."""
    s, plan, capacity = data["settings"], data["settings"]["ramp"], data["capacity"]
    lines = [
        f"**Predictive scaling on a rising ramp** (`python -m benchmarks.ramp`): two copies "
        f"of a model ({s['model']['base_ms']:g} ms + {s['model']['per_item_ms']:g} ms per "
        f"item, batches up to {s['model']['max_batch_size']}) on the local cluster with the "
        f"real HPA, Prometheus and prometheus-adapter and one tritonserver per pod, offered "
        f"the same open-loop ramp at once: {plan['low_rps']:g} to {plan['peak_rps']:g} "
        f"req/s over {plan['ramp_s']:g} s, then {plan['hold_s']:g} s at the peak. Both have "
        f"a queue-depth target of {s['target_queue_depth']} per replica and "
        f"{s['replicas']['min']}-{s['replicas']['max']} replicas; one adds the operator's "
        f"forecast. Enough replicas: {data['enough_replicas']}, the fewest whose measured "
        f"throughput ({capacity['per_replica_rps']:.1f} req/s each, one server at "
        f"saturation in the same run) covers the peak; demand needs them from "
        f"{_seconds(data['demand_needs_them_at_s'])} s.",
        "",
        "| scaling | replicas at start | enough at (s) | serving them at (s) | "
        "P95 over the ramp (ms) | P95 at the peak (ms) | replica-seconds | failed |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name in SCALERS:
        m = data["models"][name]
        lines.append(
            f"| {LABELS[name]} | {m['replicas_at_ramp_start']} | {_seconds(m['enough_at_s'])} "
            f"| {_seconds(m['serving_enough_at_s'])} | {_number(m['ramp']['p95_ms'])} | "
            f"{_number(m['peak']['p95_ms'])} | {m['replica_seconds']} | "
            f"{m['ramp']['failed'] + m['peak']['failed']} |"
        )
    return lines


# ---------------------------------------------------------------------------------------
# The run: cluster, pipeline, operator, models, load (I/O from here on)


def hpa_figures(hpa: client.V2HorizontalPodAutoscaler) -> dict[str, float]:
    """The HPA's last queue reading (per replica) and the required replicas it read: an
    AverageValue object metric reads per replica, so the operator's published count is
    that times the replicas the HPA had."""
    read = readings(hpa)
    out: dict[str, float] = {}
    if QUEUE_METRIC in read:
        out["queue"] = read[QUEUE_METRIC]
    current = hpa.status.current_replicas if hpa.status else None
    if REQUIRED_REPLICAS_METRIC in read and current:
        out["required"] = round(read[REQUIRED_REPLICAS_METRIC] * current, 2)
    return out


def queue_target(hpa: client.V2HorizontalPodAutoscaler) -> float:
    """The queue depth per replica the HPA aims for, as the operator rendered it."""
    for metric in hpa.spec.metrics or []:
        if metric.type == "Pods" and metric.pods and metric.pods.metric.name == QUEUE_METRIC:
            return quantity(str(metric.pods.target.average_value))
    raise ValueError(f"no {QUEUE_METRIC} metric in the HPA")


def wait_until(what: str, check: Callable[[], object], timeout: float, interval: float = 1) -> None:
    """Until ``check()`` is truthy; an error raised by it counts as not yet (a 404 before an
    object exists)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            if check():
                return
        except Exception:
            pass
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(interval)


def _dict(result: object) -> dict[str, Any]:
    """A CustomObjectsApi answer (typed ``object``; the object, a JSON mapping)."""
    return dict(cast("dict[str, Any]", result))


@dataclass(frozen=True)
class Kube:
    """The API clients the run uses."""

    core: client.CoreV1Api
    apps: client.AppsV1Api
    scaling: client.AutoscalingV2Api
    custom: client.CustomObjectsApi
    registration: client.ApiregistrationV1Api

    @classmethod
    def of(cls, api: client.ApiClient) -> Kube:
        return cls(
            client.CoreV1Api(api),
            client.AppsV1Api(api),
            client.AutoscalingV2Api(api),
            client.CustomObjectsApi(api),
            client.ApiregistrationV1Api(api),
        )

    def adapter_available(self) -> bool:
        status = self.registration.read_api_service("v1beta2.custom.metrics.k8s.io").status
        conditions = (status.conditions if status else None) or []
        return any(c.type == "Available" and c.status == "True" for c in conditions)

    def hpa(self, namespace: str) -> client.V2HorizontalPodAutoscaler:
        return self.scaling.read_namespaced_horizontal_pod_autoscaler(MODEL, namespace)

    def model(self, namespace: str) -> dict[str, Any]:
        return _dict(
            self.custom.get_namespaced_custom_object(
                GROUP, VERSION, namespace, "inferencemodels", MODEL
            )
        )

    def model_ready(self, namespace: str) -> bool:
        obj = self.model(namespace)
        status = obj.get("status") or {}
        return status.get("observedGeneration") == obj["metadata"]["generation"] and any(
            c["type"] == "Ready" and c["status"] == "True" for c in status.get("conditions") or []
        )

    def pool_gone(self, pool: str) -> bool:
        try:
            self.custom.get_cluster_custom_object(GROUP, VERSION, "tenantpools", pool)
        except client.ApiException as exc:
            return bool(exc.status == 404)
        return False


def tenant_pool(name: str, namespaces: list[str]) -> dict[str, Any]:
    """A shared pool admitting both namespaces, with GPUs for both models' maximum."""
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "TenantPool",
        "metadata": {"name": name},
        "spec": {
            "isolation": "Shared",
            "tenants": {"namespaces": namespaces},
            "placement": {"nodeSelector": {"shoal.dev/node-group": "shared-gpu"}},
            "quota": {"gpus": 2 * MAX_REPLICAS},
        },
    }


def batch_policy() -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "BatchPolicy",
        "metadata": {"name": "ramp"},
        "spec": {"maxBatchSize": MAX_BATCH, "maxQueueDelay": QUEUE_DELAY},
    }


def model_body(pool: str, predictive: bool) -> dict[str, Any]:
    """The model both namespaces serve; only ``predictive`` tells them apart."""
    scaling: dict[str, Any] = {"minReplicas": MIN_REPLICAS, "maxReplicas": MAX_REPLICAS}
    if predictive:
        scaling["predictive"] = {"enabled": True}
    body = linear_model(BASE_MS, PER_ITEM_MS, pool=pool, gpus=1, scaling=scaling)
    body["spec"]["batchPolicy"] = {"name": "ramp"}
    del body["metadata"]["namespace"]
    return body


@dataclass
class Watcher:
    """Samples each model's Deployment, HPA, status and answering servers every second,
    as (monotonic instant, replicas, serving, figures)."""

    kube: Kube
    namespaces: dict[str, str]
    backers: dict[str, PodBackers]
    samples: dict[str, list[tuple[float, int, int, dict[str, float]]]] = field(
        default_factory=lambda: {name: [] for name in SCALERS}
    )
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> Watcher:
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.is_set():
            for name, namespace in self.namespaces.items():
                try:
                    deployment = self.kube.apps.read_namespaced_deployment(MODEL, namespace)
                    figures = hpa_figures(self.kube.hpa(namespace))
                    status = self.kube.model(namespace).get("status") or {}
                except client.ApiException:
                    continue
                for key, field_name in (
                    ("forecast_rps", "forecastRate"),
                    ("capacity_rps", "capacityPerReplica"),
                ):
                    if status.get(field_name) is not None:
                        figures[key] = float(status[field_name])
                serving = len(self.backers[name].http_urls())
                replicas = int(deployment.spec.replicas or 0)
                self.samples[name].append((time.monotonic(), replicas, serving, figures))
            self._stop.wait(SAMPLE_SECONDS)

    def stop(self) -> None:
        self._stop.set()
        if self._thread:
            self._thread.join(30)

    def relative(self, name: str, origin: float) -> list[Sample]:
        """One model's samples, timed from ``origin``."""
        return [
            Sample(
                at - origin,
                replicas,
                serving,
                figures.get("queue"),
                figures.get("required"),
                figures.get("forecast_rps"),
                figures.get("capacity_rps"),
            )
            for at, replicas, serving, figures in list(self.samples[name])
        ]


def measure_capacity(repository: Path, workdir: Path) -> dict[str, Any]:
    """Requests/s one tritonserver with the model's rendered config sustains, with
    closed-loop clients keeping its batches full."""
    with triton.running(repository, workdir) as server:
        load = LoadGenerator(
            lambda: [server.http_url], MODEL, clients=CAPACITY_CLIENTS, body=BODY
        ).start()
        try:
            time.sleep(CAPACITY_SETTLE_S)
            sent, began = load.sent, time.monotonic()
            time.sleep(CAPACITY_SECONDS)
            rate = (load.sent - sent) / (time.monotonic() - began)
        finally:
            load.stop()
    return {
        "per_replica_rps": round(rate, 2),
        "clients": CAPACITY_CLIENTS,
        "seconds": CAPACITY_SECONDS,
        "failed": load.failed,
    }


def start_pipeline(stack: ExitStack, target: Target, kube: Kube, work: Path) -> Prometheus:
    """Prometheus with the shipped rules, and prometheus-adapter serving the custom
    metrics API; stopped when ``stack`` closes."""
    prometheus = Prometheus(work / "prometheus").start()
    stack.callback(prometheus.stop)
    adapter = MetricsAdapter(
        binary=local.ensure_binaries() / "prometheus-adapter",
        kubeconfig=target.kubeconfig,
        prometheus_url=prometheus.url,
        workdir=work / "adapter",
    ).start()
    stack.callback(adapter.stop)
    wait_until("the custom metrics APIService Available", kube.adapter_available, timeout=60)
    return prometheus


def create_namespaces(stack: ExitStack, kube: Kube, names: Iterable[str]) -> None:
    for name in names:
        meta = client.V1ObjectMeta(name=name, labels={"shoal.dev/benchmark": "ramp"})
        kube.core.create_namespace(client.V1Namespace(metadata=meta))
        stack.callback(kube.core.delete_namespace, name, propagation_policy="Background")
        wait_until(
            f"ServiceAccount default in {name}",
            partial(kube.core.read_namespaced_service_account, "default", name),
            timeout=30,
        )


def create_models(stack: ExitStack, kube: Kube, namespaces: dict[str, str], pool: str) -> None:
    """The pool, a BatchPolicy and the model in each namespace, Ready. Removed when
    ``stack`` closes, models first and then the pool, while the operator still runs: its
    finalizer holds the pool until no model uses it, and only a running operator lets go."""
    custom = kube.custom
    custom.create_cluster_custom_object(
        GROUP, VERSION, "tenantpools", tenant_pool(pool, list(namespaces.values()))
    )

    def delete_pool() -> None:
        custom.delete_cluster_custom_object(GROUP, VERSION, "tenantpools", pool)
        try:
            wait_until(f"TenantPool {pool} deleted", partial(kube.pool_gone, pool), timeout=60)
        except TimeoutError as exc:  # the figures are measured: keep them, say what is left
            print(f"warning: {exc}", flush=True)

    stack.callback(delete_pool)
    for name, namespace in namespaces.items():
        custom.create_namespaced_custom_object(
            GROUP, VERSION, namespace, "batchpolicies", batch_policy()
        )
        body = model_body(pool, predictive=name == "predictive")
        custom.create_namespaced_custom_object(GROUP, VERSION, namespace, "inferencemodels", body)
        stack.callback(
            custom.delete_namespaced_custom_object,
            GROUP,
            VERSION,
            namespace,
            "inferencemodels",
            MODEL,
        )
    for namespace in namespaces.values():
        wait_until(
            f"InferenceModel {namespace}/{MODEL} Ready",
            partial(kube.model_ready, namespace),
            timeout=120,
        )


def pipeline_live(kube: Kube, namespaces: dict[str, str]) -> bool:
    """Both HPAs read the queue depth, and the predictive one the forecast."""
    read = {name: readings(kube.hpa(namespace)) for name, namespace in namespaces.items()}
    return all(QUEUE_METRIC in r for r in read.values()) and (
        REQUIRED_REPLICAS_METRIC in read["predictive"]
    )


def warm_up(kube: Kube, namespaces: dict[str, str]) -> bool:
    """Until the pipeline is live and MIN_WARMUP_S has passed, at most MAX_WARMUP_S;
    whether it went live."""
    began = time.monotonic()
    live = False
    while time.monotonic() - began < MAX_WARMUP_S:
        try:
            live = pipeline_live(kube, namespaces)
        except client.ApiException:
            live = False
        if live and time.monotonic() - began >= MIN_WARMUP_S:
            break
        time.sleep(1)
    return live


def run(target: Target, work: Path) -> dict[str, Any]:
    """Set everything up, warm up, run the ramp on both models at once; the figures."""
    plan = RampPlan(LOW_RPS, PEAK_RPS, RAMP_S, HOLD_S)
    kube = Kube.of(target.api_client())
    kubectl = kubectl_for(target.kubeconfig)
    install_crds(kubectl)
    op_kubeconfig = operator_kubeconfig(target.kubeconfig, kubectl, work / "operator.kubeconfig")
    suffix = uuid.uuid4().hex[:5]
    namespaces = {name: f"ramp-{name.replace('_', '-')}-{suffix}" for name in SCALERS}
    with ExitStack() as stack:
        prometheus = start_pipeline(stack, target, kube, work)
        create_namespaces(stack, kube, namespaces.values())
        settings = {
            "SHOAL_PROMETHEUS_URL": prometheus.url,
            "SHOAL_NAMESPACES": ",".join(namespaces.values()),
        }
        op = stack.enter_context(
            running_operator(op_kubeconfig, work / "operator.log", env=settings)
        )
        prometheus.scrape_operator(op.metrics_url)
        create_models(stack, kube, namespaces, f"ramp-{suffix}")
        print(f"models Ready in {', '.join(namespaces.values())}", flush=True)
        backers: dict[str, PodBackers] = {}
        for name, namespace in namespaces.items():
            backers[name] = PodBackers.for_rendered(
                kube.core, namespace, MODEL, prometheus, work / name, own_targets=True
            )
            stack.callback(backers[name].stop)
        targets = {name: queue_target(kube.hpa(ns)) for name, ns in namespaces.items()}
        if len(set(targets.values())) != 1:
            raise RuntimeError(f"the queue-depth targets differ: {targets}")
        watcher = Watcher(kube, namespaces, backers).start()
        stack.callback(watcher.stop)

        # Warm-up at the low rate; one replica's capacity is measured meanwhile, beside it.
        warm_offsets = arrivals(lambda _: plan.low_rps, plan.low_rps, 0.0, MAX_WARMUP_S, SEED)
        warm_start = time.monotonic()
        warm = [
            OpenLoopLoad(b.http_urls, MODEL, BODY, warm_offsets).start(at=warm_start)
            for b in backers.values()
        ]
        for load in warm:
            stack.callback(load.stop)
        capacity = measure_capacity(backers["predictive"].repository, work / "capacity")
        print(f"capacity: {capacity['per_replica_rps']} req/s per replica", flush=True)
        live = warm_up(kube, namespaces)

        # The ramp: one list of instants, sent to both models from the same instant.
        offsets = arrivals(plan.rate, plan.peak_rps, 0.0, plan.end_s, SEED + 1)
        ramp_start = time.monotonic()
        ramp = {
            name: OpenLoopLoad(b.http_urls, MODEL, BODY, offsets).start(at=ramp_start)
            for name, b in backers.items()
        }
        for load in ramp.values():
            stack.callback(load.stop)
        for load in warm:
            load.stop()
        print(
            f"ramp started after {ramp_start - warm_start:.0f} s of warm-up (forecast "
            f"published: {live}); {len(offsets)} requests to each model",
            flush=True,
        )
        for load in ramp.values():
            load.join(plan.end_s + 120)
        watcher.stop()
        status = kube.model(namespaces["predictive"]).get("status") or {}

    needed = replicas_needed(plan.peak_rps, capacity["per_replica_rps"])
    models = {}
    for name in SCALERS:
        records = [(due - ramp_start, latency, ok) for due, latency, ok in ramp[name].records]
        models[name] = model_figures(plan, needed, records, watcher.relative(name, ramp_start))
    models["predictive"]["operator_status"] = {
        key: status.get(key) for key in ("capacityPerReplica", "forecastRate", "requiredReplicas")
    }
    return {
        "settings": {
            "model": {
                "base_ms": BASE_MS,
                "per_item_ms": PER_ITEM_MS,
                "max_batch_size": MAX_BATCH,
                "max_queue_delay": QUEUE_DELAY,
            },
            "replicas": {"min": MIN_REPLICAS, "max": MAX_REPLICAS},
            "target_queue_depth": round(next(iter(targets.values()))),
            "ramp": {
                "low_rps": plan.low_rps,
                "peak_rps": plan.peak_rps,
                "ramp_s": plan.ramp_s,
                "hold_s": plan.hold_s,
                "arrivals": f"Poisson, seed {SEED + 1}, the same instants for both models",
            },
            "warmup_s": round(ramp_start - warm_start, 1),
            "forecast_published_before_ramp": live,
            "hpa_sync_period": HPA_SYNC_PERIOD,
            "scrape_interval": SCRAPE_INTERVAL,
            "predict_every_s": PREDICT_SECONDS,
        },
        "capacity": capacity,
        "enough_replicas": needed,
        "demand_needs_them_at_s": _round(
            demand_exceeds_at(plan, (needed - 1) * capacity["per_replica_rps"])
        ),
        "models": models,
    }


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 1)


def main() -> None:
    started = time.monotonic()
    target = resolve_target()
    if not target.local:
        raise SystemExit("the ramp registers a metrics adapter on 127.0.0.1: local cluster only")
    try:
        with tempfile.TemporaryDirectory(prefix="shoal-ramp-") as work:
            results = run(target, Path(work))
    finally:
        if target.started_here and not os.environ.get("SHOAL_KEEP_CLUSTER"):
            local.down()
    data = {
        "benchmark": "predictive scaling against queue depth alone on a rising ramp (real HPA)",
        "command": "python -m benchmarks.ramp",
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
        **results,
        "took_s": round(time.monotonic() - started, 1),
    }
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "ramp.json").write_text(json.dumps(data, indent=2) + "\n")
    print("\n".join(ramp_lines(data)))


if __name__ == "__main__":
    main()
