"""The autoscalers under comparison, each reduced to: at second t, which replica count?

- Shoal: the HorizontalPodAutoscaler ``shoal.render.autoscaler.horizontal_autoscaler``
  renders for a representative InferenceModel, run through the HPA controller model.
- HPA on CPU: an autoscaling/v2 HPA with a Resource cpu Utilization target, no behavior.
- KEDA: the HPA a ScaledObject with one Prometheus trigger generates: an External metric
  (the sum of Triton's pending request counts) with an AverageValue target (the
  trigger's ``threshold``; KEDA's default metricType), minReplicas from
  ``minReplicaCount``, and no behavior unless ``advanced.horizontalPodAutoscalerConfig``
  sets one (keda.sh ScaledObject specification). It is driven by the same HPA controller.
- Shoal predictive: Shoal's HPA with one more metric, the replica count the operator's
  predictor (``shoal.autoscale.predict``) requires, published as an External metric
  with an AverageValue target of 1, so the HPA proposes exactly that count and takes
  the larger of it and the queue-depth proposal. The predictor runs where the operator
  would: on the pipeline's recorded arrival rates and Triton batch counters, a few
  seconds after each rule run; its gauge reaches the HPA at the next scrape.
- KPA: the Knative decider in ``kpa``.
- Oracle: a precomputed schedule of replica counts (``oracle``).
"""

from __future__ import annotations

from typing import Any, Protocol

from e2e.linear_model import linear_model

from benchmarks.autoscaling.cluster import Cluster
from benchmarks.autoscaling.hpa import ControllerConfig, HorizontalPodAutoscaler, parse_quantity
from benchmarks.autoscaling.kpa import KpaConfig, KpaDecider
from benchmarks.autoscaling.pipeline import KEDA_METRIC, REQUIRED_METRIC, Pipeline
from shoal.api.batchpolicy import BatchPolicySpec
from shoal.api.inferencemodel import InferenceModel, Runtime
from shoal.api.tenantpool import TenantPoolSpec
from shoal.autoscale.predict import (
    DEFAULT_ERROR_QUANTILE,
    BatchCounters,
    BatchSettings,
    CapacityConfig,
    CapacityEstimate,
    ForecastConfig,
    RateHistory,
    estimate_capacity,
    forecast_demand,
    required_replicas,
)
from shoal.render.autoscaler import horizontal_autoscaler
from shoal.render.batching import effective_batching

MAX_REPLICAS = 64
MIN_REPLICAS = 1
# The CPU a Shoal replica requests by default (InferenceModel spec.runtime.cpu).
CPU_REQUEST_CORES = parse_quantity(Runtime().cpu)


class Scaler(Protocol):
    name: str

    def decide(self, t: int, cluster: Cluster, pipeline: Pipeline) -> int | None:
        """The replica count to set at second t, or None to leave it."""
        ...


def representative_model(
    base_ms: float,
    per_item_ms: float,
    target_queue_depth: int | None = None,
    target_p95: str | None = None,
    scale_down_window: str | None = None,
) -> InferenceModel:
    """The benchmarks' linear-cost model, one GPU per replica, warm pool of one."""
    scaling: dict[str, Any] = {"minReplicas": MIN_REPLICAS, "maxReplicas": MAX_REPLICAS}
    if target_queue_depth is not None:
        scaling["targetQueueDepth"] = target_queue_depth
    if target_p95 is not None:
        scaling["targetP95Latency"] = target_p95
    if scale_down_window is not None:
        scaling["scaleDown"] = {"stabilizationWindow": scale_down_window}
    document = linear_model(base_ms, per_item_ms, gpus=1, scaling=scaling)
    return InferenceModel.model_validate(document)


def representative_pool() -> TenantPoolSpec:
    """A shared pool whose GPU quota does not cap the model's maxReplicas. The replay
    sends requests straight to the replicas: the pool has no gateway, so the HPA has no
    gateway queue to watch."""
    return TenantPoolSpec.model_validate(
        {
            "isolation": "Shared",
            "tenants": {"namespaces": ["ns"]},
            "quota": {"gpus": 1000},
            "gateway": {"enabled": False},
        }
    )


def shoal_hpa_spec(model: InferenceModel, policy: BatchPolicySpec | None = None) -> dict[str, Any]:
    """The ``spec`` of the HPA Shoal renders for the model (default BatchPolicy)."""
    batching = effective_batching(model, policy)
    spec: dict[str, Any] = horizontal_autoscaler(model, batching, representative_pool())["spec"]
    return spec


def cpu_hpa_spec(utilization_pct: int) -> dict[str, Any]:
    return {
        "minReplicas": MIN_REPLICAS,
        "maxReplicas": MAX_REPLICAS,
        "metrics": [
            {
                "type": "Resource",
                "resource": {
                    "name": "cpu",
                    "target": {"type": "Utilization", "averageUtilization": utilization_pct},
                },
            }
        ],
    }


def keda_hpa_spec(threshold: float) -> dict[str, Any]:
    return {
        "minReplicas": MIN_REPLICAS,
        "maxReplicas": MAX_REPLICAS,
        "metrics": [
            {
                "type": "External",
                "external": {
                    "metric": {"name": KEDA_METRIC},
                    "target": {
                        "type": "AverageValue",
                        "averageValue": f"{round(threshold * 1000)}m",
                    },
                },
            }
        ],
    }


class HpaScaler:
    """An HPA object and its controller, synced every sync period."""

    def __init__(
        self,
        name: str,
        spec: dict[str, Any],
        config: ControllerConfig | None = None,
        phase_s: int = 0,
    ) -> None:
        self.name = name
        self.hpa = HorizontalPodAutoscaler(spec, config)
        self.phase_s = phase_s

    def decide(self, t: int, cluster: Cluster, pipeline: Pipeline) -> int | None:
        period = round(self.hpa.config.sync_period_s)
        if (t - self.phase_s) % period != 0:
            return None
        pods = [p.info(t, CPU_REQUEST_CORES) for p in cluster.pods]
        metrics = pipeline.snapshot(self.hpa.spec, cluster)
        live = len(cluster.live())
        return self.hpa.sync(float(t), cluster.spec_replicas, live, pods, metrics)


def required_replicas_metric() -> dict[str, Any]:
    """The HPA entry for the predictor's published count: AverageValue 1 per replica."""
    return {
        "type": "External",
        "external": {
            "metric": {"name": REQUIRED_METRIC},
            "target": {"type": "AverageValue", "averageValue": "1"},
        },
    }


# Defaults of the predictive mode (not tuned per trace).
# The predictor's own default: the quantile of its past errors it provisions for.
PREDICT_ERROR_QUANTILE = DEFAULT_ERROR_QUANTILE
# The knob search's candidates, most replicas first.
PREDICT_ERROR_QUANTILES = (0.999, 0.995, 0.99, 0.98, 0.95, 0.9, 0.8, 0.65, 0.5)
PREDICT_INTERVAL_S = 15
PREDICT_OFFSET_S = 10  # three seconds after the pipeline's rule run
CAPACITY_LOOKBACK = 8  # rule runs of batch counters per capacity estimate (2 minutes)


class PredictiveScaler(HpaScaler):
    """Shoal's HPA plus the required-replicas metric its operator computes and publishes.

    Capacity is measured from the replicas' own counters (as the operator measures it
    from Triton's), never read from the calibration.
    """

    def __init__(
        self,
        name: str,
        spec: dict[str, Any],
        batch: BatchSettings,
        forecast_config: ForecastConfig,
        step_s: float = 15.0,
    ) -> None:
        super().__init__(name, spec)
        self.batch = batch
        self.step_s = step_s
        self.forecast_config = forecast_config
        self.capacity: CapacityEstimate | None = None
        self.capacity_config = CapacityConfig()

    def predict(self, pipeline: Pipeline) -> None:
        """One run of the operator's predictor: publish the required replica count."""
        if not pipeline.rate_history:
            return
        recent: list[BatchCounters] = [
            b for run in pipeline.batch_history[-CAPACITY_LOOKBACK:] for b in run
        ]
        self.capacity = estimate_capacity(recent, self.batch, self.capacity, self.capacity_config)
        if self.capacity is None:
            return  # nothing measured yet: publish nothing, the reactive metric rules
        history = RateHistory(self.step_s, tuple(pipeline.rate_history))
        forecast = forecast_demand(history, self.forecast_config)
        count = required_replicas(
            forecast, self.capacity, min_replicas=MIN_REPLICAS, max_replicas=MAX_REPLICAS
        )
        pipeline.operator_gauges[REQUIRED_METRIC] = float(count)

    def decide(self, t: int, cluster: Cluster, pipeline: Pipeline) -> int | None:
        if (t - PREDICT_OFFSET_S) % PREDICT_INTERVAL_S == 0:
            self.predict(pipeline)
        return super().decide(t, cluster, pipeline)


class KpaScaler:
    """The Knative decider: a bucket every second, a decision every tick."""

    def __init__(self, config: KpaConfig) -> None:
        self.name = "knative-kpa"
        self.config = config
        self.decider: KpaDecider | None = None

    def decide(self, t: int, cluster: Cluster, pipeline: Pipeline) -> int | None:
        ready = len(cluster.routable(t))
        if self.decider is None:
            self.decider = KpaDecider(self.config, ready, float(t))
            return None
        self.decider.record(pipeline.concurrency_last_second)
        if t % self.config.tick_s != 0:
            return None
        return self.decider.scale(float(t), ready)


class ScheduleScaler:
    """Replica counts decided in advance: the clairvoyant oracle's plan."""

    def __init__(self, name: str, plan: list[int]) -> None:
        self.name = name
        self.plan = plan  # desired replicas at each second

    def decide(self, t: int, cluster: Cluster, pipeline: Pipeline) -> int | None:
        return self.plan[min(t, len(self.plan) - 1)]
