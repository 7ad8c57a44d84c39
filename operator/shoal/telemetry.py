"""The operator's own metrics (Prometheus), and the watch-freshness check its liveness
probe runs."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field

from prometheus_client import Counter, Gauge, Histogram

RECONCILES = Counter(
    "shoal_reconciles_total", "Reconcile passes, by kind and result.", ["kind", "result"]
)
RECONCILE_SECONDS = Histogram(
    "shoal_reconcile_duration_seconds",
    "Time one reconcile pass took, by kind and result.",
    ["kind", "result"],
    buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
)
RETRIES = Counter(
    "shoal_reconcile_retries_total",
    "Failed passes put back on the work queue after a backoff, by kind.",
    ["kind"],
)
WRITES = Counter("shoal_api_writes_total", "Writes sent to the API server, by kind.", ["kind"])
EVENTS = Counter(
    "shoal_watch_events_total",
    "Watch events received, by kind, and whether they called for a pass.",
    ["kind", "relevant"],
)
RESYNCS = Counter(
    "shoal_resyncs_total", "Periodic resync rounds: every served object was requested a pass."
)
QUEUE_DEPTH = Gauge("shoal_workqueue_depth", "Objects waiting for a reconcile pass.")
MANAGED = Gauge("shoal_managed_objects", "Custom resources the operator manages.", ["kind"])
# What the predictor found for each model with spec.scaling.predictive. The replicas
# carry the model's Service as ``service``: the HPA reads them as an object metric on it
# (through prometheus-adapter); Prometheus keeps these labels (``honor_labels``).
REQUIRED_REPLICAS = Gauge(
    "shoal_model_required_replicas",
    "Replicas a model's forecast demand needs at its measured capacity per replica.",
    ["namespace", "service"],
)
FORECAST_RATE = Gauge(
    "shoal_model_forecast_requests_per_second",
    "A model's arrival rate forecast one cold start plus the metric lag ahead.",
    ["namespace", "inferencemodel"],
)
CAPACITY = Gauge(
    "shoal_model_capacity_per_replica",
    "Requests per second one replica of a model sustains within its latency target.",
    ["namespace", "inferencemodel"],
)
COLD_START = Gauge(
    "shoal_model_cold_start_seconds",
    "Median time a model's pods took from created to Ready.",
    ["namespace", "inferencemodel"],
)
BUILD_INFO = Gauge("shoal_build_info", "The operator's version; always 1.", ["version"])
LEADER = Gauge(
    "shoal_leader", "1 on the replica that holds the Lease and reconciles, 0 on a follower."
)
# Per model, for alerts and dashboards: the status conditions as the last pass wrote
# them (1 for the current status of each type), and the P95 target when one is set.
MODEL_CONDITION = Gauge(
    "shoal_model_condition",
    "An InferenceModel's status condition: 1 for its current status.",
    ["namespace", "inferencemodel", "type", "status"],
)
MODEL_TARGET_P95 = Gauge(
    "shoal_model_target_p95_seconds",
    "An InferenceModel's P95 latency target (spec.scaling.targetP95Latency).",
    ["namespace", "inferencemodel"],
)


@dataclass
class ModelGauges:
    """Publishes each model's conditions and P95 target as gauges, remembering what it
    published for each model so a status or type no longer reported, an unset target
    and a deleted model leave no series behind. Thread-safe."""

    _published: dict[tuple[str, str], set[tuple[str, str]]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def publish(
        self,
        namespace: str,
        name: str,
        conditions: list[dict[str, str]],
        target_p95_s: float | None,
    ) -> None:
        current = {(c["type"], c["status"]) for c in conditions}
        with self._lock:
            before = self._published.pop((namespace, name), set())
            for kind, status in before - current:
                _discard(MODEL_CONDITION, namespace, name, kind, status)
            for kind, status in current:
                MODEL_CONDITION.labels(namespace, name, kind, status).set(1)
            if current:
                self._published[(namespace, name)] = current
        if target_p95_s is None:
            _discard(MODEL_TARGET_P95, namespace, name)
        else:
            MODEL_TARGET_P95.labels(namespace, name).set(target_p95_s)

    def forget(self, namespace: str, name: str) -> None:
        self.publish(namespace, name, [], None)


def _discard(gauge: Gauge, *labels: str) -> None:
    with contextlib.suppress(KeyError):
        gauge.remove(*labels)


# Per pool with elastic capacity (spec.capacity): its GPUs as Kueue accounts them, and
# its replicas waiting for quota. The reclaim alert reads both.
POOL_GPUS = Gauge(
    "shoal_pool_gpus",
    "A TenantPool's elastic GPUs by kind: nominal, in_use, borrowed, lent.",
    ["tenantpool", "isolation", "kind"],
)
POOL_WAITING = Gauge(
    "shoal_pool_waiting_replicas",
    "A TenantPool's replicas waiting for Kueue to admit them.",
    ["tenantpool", "isolation"],
)
POOL_GPU_KINDS = {
    "nominal": "nominalGpus",
    "in_use": "inUseGpus",
    "borrowed": "borrowedGpus",
    "lent": "lentGpus",
}


@dataclass
class PoolGauges:
    """Publishes each elastic pool's figures (status.capacity) as gauges; a pool that
    is gone, or no longer elastic, or whose isolation changed leaves no series behind.
    Thread-safe."""

    _published: dict[str, str] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def publish(self, pool: str, isolation: str, capacity: Mapping[str, object] | None) -> None:
        elastic = capacity is not None and capacity.get("mode") == "Kueue"
        with self._lock:
            before = self._published.pop(pool, None)
            if before is not None and (not elastic or before != isolation):
                for kind in POOL_GPU_KINDS:
                    _discard(POOL_GPUS, pool, before, kind)
                _discard(POOL_WAITING, pool, before)
            if not elastic or capacity is None:
                return
            for kind, key in POOL_GPU_KINDS.items():
                POOL_GPUS.labels(pool, isolation, kind).set(_number(capacity.get(key)))
            POOL_WAITING.labels(pool, isolation).set(_number(capacity.get("waitingReplicas")))
            self._published[pool] = isolation

    def forget(self, pool: str) -> None:
        self.publish(pool, "", None)


def _number(value: object) -> float:
    return float(value) if isinstance(value, int | float) else 0.0


STALE_WATCH = Gauge(
    "shoal_watch_stale_objects", "Objects whose latest version the watch has not delivered."
)


def stale_keys(
    listed: Mapping[tuple[str, str], str],
    watched: Mapping[tuple[str, str], str],
    first_seen: dict[tuple[str, str], float],
    now: float | None = None,
) -> dict[tuple[str, str], float]:
    """Objects the API server lists at a version the watch has not delivered, with how
    long each has been missing (seconds). ``first_seen`` carries state between calls.

    A healthy watch catches up within moments; one that silently stalled never does.
    """
    now = time.monotonic() if now is None else now
    behind = {key for key, version in listed.items() if watched.get(key) != version}
    for key in list(first_seen):
        if key not in behind:
            del first_seen[key]
    for key in behind:
        first_seen.setdefault(key, now)
    return {key: now - first_seen[key] for key in behind}
