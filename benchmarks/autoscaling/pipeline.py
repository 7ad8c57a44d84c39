"""What the autoscalers see, and when: scrapes, recording rules, metrics-server, KEDA.

Every autoscaler here acts on samples, not on the truth, and the age of those samples is
part of the comparison. Timings and their sources:

- Prometheus scrapes each Triton pod every ``scrape_interval_s`` (15 s, the interval of
  Prometheus's shipped example configuration and of most Kubernetes setups; the
  built-in default, ``config.DefaultGlobalConfig`` in prometheus/prometheus, is 1m). Each
  pod is scraped at its own offset in the interval, as Prometheus spreads targets.
  ``nv_inference_pending_request_count`` is a gauge: the value at the scrape instant.
- Shoal's recording rules (operator/shoal/metrics/pipeline.py) run every
  ``rule_interval_s`` (15 s, same source; built-in default 1m), so ``shoal:*`` series lag
  the scrape by up to one evaluation. Shoal's 1m rate window applies to its rate rules
  (request rate, batch size), which the HPA does not use.
- prometheus-adapter answers each custom-metrics request with a live PromQL query; its
  ``--metrics-relist-interval`` only refreshes the catalogue of series names, which
  exist from the start here, so it adds no lag.
- Triton's latency summaries (``nv_inference_request_summary_us``) are prometheus-cpp
  Summaries created with quantiles only (triton-inference-server/core
  src/metric_model_reporter.cc, InitializeSummaries), so they use prometheus-cpp's
  defaults: ``max_age`` 60 s over 5 age buckets (core/include/prometheus/summary.h). A
  pod's P95 is modelled as the P95 of its requests completed in the last 60 s.
- metrics-server scrapes kubelets every ``metrics_server_resolution_s`` (15 s: the
  ``--metric-resolution`` of its upstream manifests; the binary's default is 60s) and
  reports CPU as the usage rate between its last two samples, timestamped at the later
  one, with that interval as the window. A pod has no CPU sample until two were taken.
- KEDA's metrics server queries Prometheus on each HPA request unless the trigger sets
  ``useCachedMetrics: true`` (default false, keda.sh ScaledObject specification); with
  it the value is refreshed every ``pollingInterval`` (default 30 s, same page).

For Shoal's predictive signal the pipeline also keeps what the operator would read from
Prometheus: each pod's request and batch counters at its scrapes, and at each rule run
the model's arrival rate (the sum of the pods' rates between their last two scrapes, as
``rate()`` over a short window) and each pod's counter increments. The operator's own
gauge (the required replicas it publishes) is scraped like any target, every
``scrape_interval_s`` at ``operator_scrape_offset_s``.

CPU of a Triton pod is an assumption, not a measurement: on a GPU node the model runs on
the GPU and the CPU does frontend work, modelled as an idle floor plus a cost per
request (HTTP/JSON decode and encode) and per batch, and one core while the model loads.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from benchmarks.autoscaling.cluster import Cluster, Pod
from benchmarks.autoscaling.hpa import HpaSpec, MetricSnapshot, ResourceSample
from shoal.autoscale.predict import BatchCounters
from shoal.render.autoscaler import P95_METRIC, QUEUE_METRIC

KEDA_METRIC = "s0-prometheus"  # the External metric name KEDA gives its first trigger
# The External metric the operator's predictor publishes (target AverageValue 1).
REQUIRED_METRIC = "shoal_required_replicas"

SCRAPE_INTERVAL_S = 15
RULE_INTERVAL_S = 15
METRICS_SERVER_RESOLUTION_S = 15
KEDA_POLLING_INTERVAL_S = 30
TRITON_SUMMARY_MAX_AGE_S = 60.0


@dataclass(frozen=True)
class CpuModel:
    """Assumed CPU use of a Triton pod whose model runs on a GPU (cores, seconds)."""

    idle_cores: float = 0.1
    per_request_s: float = 0.002
    per_batch_s: float = 0.001
    loading_cores: float = 1.0


@dataclass(frozen=True)
class PipelineConfig:
    scrape_interval_s: int = SCRAPE_INTERVAL_S
    rule_interval_s: int = RULE_INTERVAL_S
    rule_offset_s: int = 7
    metrics_server_resolution_s: int = METRICS_SERVER_RESOLUTION_S
    metrics_server_offset_s: int = 8
    keda_polling_interval_s: int = KEDA_POLLING_INTERVAL_S
    keda_cached_metrics: bool = False
    summary_max_age_s: float = TRITON_SUMMARY_MAX_AGE_S
    track_p95: bool = False
    operator_scrape_offset_s: int = 0

    def scrape_offset(self, pod: Pod) -> int:
        """Where in the interval a pod is scraped: spread, deterministic."""
        return (pod.index * 7) % self.scrape_interval_s


class Pipeline:
    """Samples, recorded series and caches, advanced once per simulated second."""

    def __init__(self, config: PipelineConfig) -> None:
        self.config = config
        self.scraped_queue: dict[str, float] = {}  # latest raw sample per live series
        self.scraped_p95: dict[str, float] = {}
        self.recorded_queue: dict[str, float] = {}  # shoal:queue_depth:pod at the last rule run
        self.recorded_p95: float | None = None  # shoal:request_p95_seconds:model
        self.cpu_points: dict[str, list[tuple[float, float]]] = {}
        self.keda_cache: float | None = None
        self.concurrency_last_second = 0.0
        # (time, received, executions, inferences, compute seconds): last two scrapes.
        self.counters: dict[str, list[tuple[float, float, float, float, float]]] = {}
        self.rate_history: list[float] = []  # model arrival rate at each rule run
        self.batch_history: list[list[BatchCounters]] = []  # per-pod increments, same
        self.operator_gauges: dict[str, float] = {}  # what the operator publishes now
        self.scraped_operator: dict[str, float] = {}

    def collect(self, t: int, cluster: Cluster) -> None:
        """Scrapes, rule runs and metrics-server samples due at second t."""
        cfg = self.config
        names = set()
        concurrency = 0.0
        for pod in cluster.pods:
            name = pod.name
            names.add(name)
            if pod.ready_at <= t - 1 and pod.deleted_at is None:
                concurrency += pod.last_step_concurrency
            if pod.serves_metrics(t) and (t - cfg.scrape_offset(pod)) % cfg.scrape_interval_s == 0:
                self.scraped_queue[name] = float(pod.pending)
                r = pod.replica
                samples = self.counters.setdefault(name, [])
                samples.append((float(t), r.arrived, r.batches, r.inferences, r.compute_s))
                del samples[:-2]
                if cfg.track_p95:
                    p95 = self._pod_p95(pod, t)
                    if p95 is None:
                        self.scraped_p95.pop(name, None)
                    else:
                        self.scraped_p95[name] = p95
            if (
                pod.running(t)
                and (t - cfg.metrics_server_offset_s) % cfg.metrics_server_resolution_s == 0
            ):
                points = self.cpu_points.setdefault(name, [])
                points.append((float(t), pod.cpu_seconds))
                del points[:-2]
        self.concurrency_last_second = concurrency
        # Series of pods that are gone turn stale.
        for table in (self.scraped_queue, self.scraped_p95, self.cpu_points, self.counters):
            for name in [n for n in table if n not in names]:
                del table[name]
        if (t - cfg.rule_offset_s) % cfg.rule_interval_s == 0:
            self.recorded_queue = dict(self.scraped_queue)
            self.recorded_p95 = max(self.scraped_p95.values()) if self.scraped_p95 else None
            self._record_counters(t)
        if (t - cfg.operator_scrape_offset_s) % cfg.scrape_interval_s == 0:
            self.scraped_operator = dict(self.operator_gauges)
        if (t % cfg.keda_polling_interval_s) == 0:
            self.keda_cache = sum(self.scraped_queue.values()) if self.scraped_queue else None

    def _record_counters(self, t: int) -> None:
        """The model's arrival rate and each pod's batch counters since its last scrape,
        for pods scraped twice within the last two intervals (fresh series only)."""
        if not self.rate_history and any(len(v) < 2 for v in self.counters.values()):
            return  # warming up: a real Prometheus holds history from before the replay
        rate = 0.0
        batches = []
        fresh = t - 2 * self.config.scrape_interval_s
        for samples in self.counters.values():
            if len(samples) < 2 or samples[0][0] < fresh:
                continue
            (t1, a1, e1, i1, c1), (t2, a2, e2, i2, c2) = samples
            rate += (a2 - a1) / (t2 - t1)
            batches.append(BatchCounters(e2 - e1, i2 - i1, c2 - c1))
        self.rate_history.append(rate)
        self.batch_history.append(batches)

    def _pod_p95(self, pod: Pod, t: float) -> float | None:
        recent = [
            (when, lat)
            for when, lat in pod.recent_latencies
            if when > t - self.config.summary_max_age_s
        ]
        pod.recent_latencies = recent
        if not recent:
            return None
        return float(np.percentile(np.concatenate([lat for _, lat in recent]), 95))

    def snapshot(self, spec: HpaSpec, cluster: Cluster) -> MetricSnapshot:
        """What the metric APIs answer an HPA sync; metrics without data are left out."""
        snapshot = MetricSnapshot()
        existing = {p.name for p in cluster.pods}
        for metric in spec.metrics:
            if metric.source == "Pods" and metric.name == QUEUE_METRIC:
                values = {n: v for n, v in self.recorded_queue.items() if n in existing}
                if values:
                    snapshot.pods[metric.name] = values
            elif metric.source == "Object" and metric.name == P95_METRIC:
                if self.recorded_p95 is not None:
                    snapshot.objects[metric.name] = self.recorded_p95
            elif metric.source == "External" and metric.name == KEDA_METRIC:
                if self.config.keda_cached_metrics:
                    value = self.keda_cache
                else:
                    value = sum(self.scraped_queue.values()) if self.scraped_queue else None
                if value is not None:
                    snapshot.external[metric.name] = value
            elif metric.source == "External" and metric.name == REQUIRED_METRIC:
                if metric.name in self.scraped_operator:
                    snapshot.external[metric.name] = self.scraped_operator[metric.name]
            elif metric.source == "Resource" and metric.name == "cpu":
                samples = {}
                for name, points in self.cpu_points.items():
                    if len(points) == 2:
                        (t1, c1), (t2, c2) = points
                        samples[name] = ResourceSample((c2 - c1) / (t2 - t1), t2, t2 - t1)
                snapshot.resources[metric.name] = samples
            else:
                raise NotImplementedError(f"no pipeline for {metric.source} metric {metric.name}")
        return snapshot
