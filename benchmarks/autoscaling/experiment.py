"""The experiment: which workloads, which scalers and knobs, and the work items.

Everything here is deterministic given the settings: seeded workloads, a fixed
calibration, and simulations without randomness. The work items (one oracle per
workload, one knob search per workload and scaler) are independent, so the command
line runs them in worker processes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from benchmarks.autoscaling.calibration import Calibration
from benchmarks.autoscaling.cluster import PodTiming
from benchmarks.autoscaling.hpa import DEFAULT_CPU_UTILIZATION
from benchmarks.autoscaling.kpa import KpaConfig
from benchmarks.autoscaling.oracle import oracle_windows, provision_plan, refine
from benchmarks.autoscaling.pipeline import PipelineConfig
from benchmarks.autoscaling.replica import BatcherConfig
from benchmarks.autoscaling.scalers import (
    PREDICT_ERROR_QUANTILE,
    PREDICT_ERROR_QUANTILES,
    HpaScaler,
    KpaScaler,
    PredictiveScaler,
    Scaler,
    ScheduleScaler,
    cpu_hpa_spec,
    keda_hpa_spec,
    representative_model,
    required_replicas_metric,
    shoal_hpa_spec,
)
from benchmarks.autoscaling.search import Knob, SearchResult, cheapest_passing
from benchmarks.autoscaling.simulate import RunResult, SimConfig, simulate
from benchmarks.autoscaling.workload import (
    Workload,
    azure_workload,
    burst_workload,
    choose_amplification,
    load_trace,
)
from benchmarks.batching import BASE_MS, P95_TARGET_S, PER_ITEM_MS
from shoal.api.batchpolicy import BatchPolicySpec
from shoal.api.common import parse_duration
from shoal.autoscale.predict import BatchSettings
from shoal.autoscale.signals import forecast_config
from shoal.render.autoscaler import PREDICTIVE_COOL_DOWN, target_queue_depth
from shoal.render.batching import effective_batching

GOAL = 0.99  # share of one-minute windows in SLO
# The predictive rows: as `predictive: {enabled: true}` renders by default (the model's
# 5-minute cool-down), and paired with the short cool-down the write-up recommends.
PREDICTIVE = "shoal-predictive"
PREDICTIVE_SHORT_COOL_DOWN = "shoal-predictive-short-cool-down"
SEED = 20231116
SHOAL_P95_TARGET = "200ms"  # the variant with targetP95Latency: 80% of the SLO target


@dataclass(frozen=True)
class Settings:
    quick: bool = False
    cold_start_s: float = 60.0
    pending_s: float = 30.0
    jitter_s: float = 10.0
    peak_replicas: int = 12
    minutes: int | None = None  # None: the whole trace
    burst_minutes: int = 45
    keda_cached_metrics: bool = False
    seed: int = SEED


@dataclass(frozen=True)
class Experiment:
    settings: Settings
    calibration: Calibration
    policy: BatchPolicySpec
    batcher: BatcherConfig
    workloads: dict[str, Workload]
    amplification: int
    slo_target_s: float = P95_TARGET_S

    def sim_config(
        self, initial: int, track_p95: bool = False, cached: bool | None = None
    ) -> SimConfig:
        """Every scaler starts with ``initial`` Ready replicas: the oracle's count at t=0."""
        keda_cached = self.settings.keda_cached_metrics if cached is None else cached
        return SimConfig(
            batcher=self.batcher,
            timing=PodTiming(self.settings.cold_start_s, self.settings.pending_s),
            initial_replicas=initial,
            slo_target_s=self.slo_target_s,
            pipeline=PipelineConfig(track_p95=track_p95, keda_cached_metrics=keda_cached),
        )


def default_policy() -> BatchPolicySpec:
    """Shoal's default BatchPolicy, as the operator applies it to a model."""
    return effective_batching(representative_model(BASE_MS, PER_ITEM_MS), None)


def build(settings: Settings, calibration: Calibration) -> Experiment:
    """Make the workloads: the amplified Azure trace and the synthetic bursts."""
    policy = default_policy()
    batcher = BatcherConfig(
        max_batch=policy.max_batch_size,
        max_queue_delay_s=parse_duration(policy.max_queue_delay),
        base_s=calibration.base_s,
        per_item_s=calibration.per_item_s,
    )
    base = load_trace()
    full_rate = calibration.max_throughput(policy.max_batch_size)
    k = choose_amplification(base, full_rate, settings.peak_replicas)
    azure = azure_workload(base, k, settings.jitter_s, settings.seed, settings.minutes)
    # The bursts' 5x spikes reach the same peak as the Azure trace's busiest minute.
    bursts = burst_workload(
        base_rate=float(azure.rate_per_window().max()) / 5.0,
        minutes=settings.burst_minutes,
        seed=settings.seed + 1,
    )
    return Experiment(
        settings=settings,
        calibration=calibration,
        policy=policy,
        batcher=batcher,
        workloads={azure.name: azure, bursts.name: bursts},
        amplification=k,
    )


@dataclass(frozen=True)
class ScalerKind:
    """A scaler, its knob, and how to build it at a knob value."""

    key: str
    label: str
    knob: Knob
    make: Callable[[float], Scaler]
    track_p95: bool = False
    is_baseline: bool = True

    def spec(self, value: float) -> dict[str, Any] | None:
        """The HPA spec the scaler runs at this setting (None for non-HPA scalers)."""
        scaler = self.make(value)
        return scaler.hpa.raw if isinstance(scaler, HpaScaler) else None


def _int_range(lo: int, hi: int) -> tuple[float, ...]:
    return tuple(float(v) for v in range(lo, hi + 1))


def scaler_kinds(experiment: Experiment) -> dict[str, ScalerKind]:
    model = representative_model(BASE_MS, PER_ITEM_MS)
    shoal_default = float(target_queue_depth(model, experiment.policy))
    quick = experiment.settings.quick
    fine = (0.25, 0.5, 0.75, *_int_range(1, 16), 20.0, 24.0, 32.0, 48.0, 64.0)
    concurrency = (1, 2, 3, 4, 5, 6, 8, 10, 12, 14, 16, 20, 24, 28, 32, 40, 48, 64, 80, 100, 128)

    def shoal(value: float, p95: str | None = None) -> Scaler:
        im = representative_model(
            BASE_MS, PER_ITEM_MS, target_queue_depth=round(value), target_p95=p95
        )
        return HpaScaler("shoal", shoal_hpa_spec(im, experiment.policy))

    def predictive(key: str, error_quantile: float, scale_down_window: str | None = None) -> Scaler:
        im = representative_model(BASE_MS, PER_ITEM_MS, scale_down_window=scale_down_window)
        spec = shoal_hpa_spec(im, experiment.policy)
        spec["metrics"].append(required_replicas_metric())
        batch = BatchSettings(
            max_batch_size=experiment.policy.max_batch_size,
            max_queue_delay_s=parse_duration(experiment.policy.max_queue_delay),
            target_p95_s=experiment.slo_target_s,
        )
        config = forecast_config(im, experiment.settings.cold_start_s)
        config = replace(config, error_quantile=error_quantile)
        return PredictiveScaler(key, spec, batch, config)

    kinds = [
        ScalerKind(
            PREDICTIVE,
            "Shoal predictive",
            Knob("error quantile", PREDICT_ERROR_QUANTILES, PREDICT_ERROR_QUANTILE, "quantile"),
            lambda q: predictive(PREDICTIVE, q),
            is_baseline=False,
        ),
        ScalerKind(
            PREDICTIVE_SHORT_COOL_DOWN,
            f"Shoal predictive, cool-down {PREDICTIVE_COOL_DOWN}",
            Knob("error quantile", PREDICT_ERROR_QUANTILES, PREDICT_ERROR_QUANTILE, "quantile"),
            lambda q: predictive(PREDICTIVE_SHORT_COOL_DOWN, q, PREDICTIVE_COOL_DOWN),
            is_baseline=False,
        ),
        ScalerKind(
            "shoal",
            "Shoal HPA (queue depth)",
            Knob("spec.scaling.targetQueueDepth", _int_range(1, 64), shoal_default, "queue"),
            shoal,
            is_baseline=False,
        ),
        ScalerKind(
            "shoal-p95",
            f"Shoal HPA (queue depth + P95 {SHOAL_P95_TARGET})",
            Knob("spec.scaling.targetQueueDepth", _int_range(1, 64), shoal_default, "queue"),
            lambda v: shoal(v, SHOAL_P95_TARGET),
            track_p95=True,
            is_baseline=False,
        ),
        ScalerKind(
            "cpu-hpa",
            "HPA on CPU utilization",
            Knob(
                "averageUtilization (%)",
                _int_range(1, 100),
                float(DEFAULT_CPU_UTILIZATION),
                "cpu%",
            ),
            lambda v: HpaScaler("cpu-hpa", cpu_hpa_spec(round(v))),
        ),
        ScalerKind(
            "keda",
            "KEDA Prometheus (queue)",
            Knob("trigger threshold (queue per replica)", fine, shoal_default, "threshold"),
            lambda v: HpaScaler("keda", keda_hpa_spec(v)),
        ),
        ScalerKind(
            "knative-kpa",
            "Knative KPA (concurrency)",
            Knob(
                "container-concurrency-target-default",
                tuple(float(c) for c in concurrency),
                KpaConfig().container_concurrency_target,
                "concurrency",
            ),
            lambda v: KpaScaler(replace(KpaConfig(), container_concurrency_target=v)),
        ),
    ]
    if quick:
        kinds = [k for k in kinds if k.key != "shoal-p95"]
    return {k.key: k for k in kinds}


# Work items, run in worker processes that inherit ``CURRENT`` (set before they start).
CURRENT: dict[str, Experiment] = {}


def run_oracle(workload_name: str) -> tuple[list[int], RunResult]:
    """Per-window needs, refined by replaying the provisioned plan."""
    experiment = CURRENT["experiment"]
    workload = experiment.workloads[workload_name]
    cold = experiment.settings.cold_start_s
    per_window = oracle_windows(workload, experiment.batcher, experiment.slo_target_s)

    def replay(needs: list[int]) -> tuple[tuple[bool, ...], RunResult]:
        plan = provision_plan(needs, cold, workload.horizon_s)
        config = experiment.sim_config(plan[0])
        result = simulate(workload, ScheduleScaler("oracle", plan), config)
        return result.score.in_slo, result

    needs, result = refine(per_window, replay)
    assert isinstance(result, RunResult)
    return needs, result


def run_search(workload_name: str, key: str, initial: int) -> SearchResult:
    experiment = CURRENT["experiment"]
    kind = scaler_kinds(experiment)[key]
    workload = experiment.workloads[workload_name]
    config = experiment.sim_config(initial, track_p95=kind.track_p95)

    def evaluate(value: float) -> RunResult:
        return simulate(workload, kind.make(value), config, knob=value)

    return cheapest_passing(kind.knob, GOAL, evaluate)


def run_single(
    workload_name: str, key: str, value: float, initial: int, keda_cached: bool
) -> RunResult:
    """One replay outside a search (a sensitivity row)."""
    experiment = CURRENT["experiment"]
    kind = scaler_kinds(experiment)[key]
    config = experiment.sim_config(initial, track_p95=kind.track_p95, cached=keda_cached)
    return simulate(experiment.workloads[workload_name], kind.make(value), config, knob=value)


def describe(experiment: Experiment) -> dict[str, Any]:
    s = experiment.settings
    return {
        "slo": {
            "p95_target_ms": experiment.slo_target_s * 1000,
            "window_s": 60,
            "goal_pct": GOAL * 100,
        },
        "calibration": experiment.calibration.as_dict(),
        "batch_policy": {
            "maxBatchSize": experiment.policy.max_batch_size,
            "maxQueueDelay": experiment.policy.max_queue_delay,
            "preferredBatchSizes": "ignored (Shoal's default sets none)",
            "replica_full_batch_rate_per_s": round(
                experiment.calibration.max_throughput(experiment.policy.max_batch_size), 1
            ),
        },
        "cold_start_s": s.cold_start_s,
        "pending_s": s.pending_s,
        "amplification_k": experiment.amplification,
        "jitter_s": s.jitter_s,
        "seed": s.seed,
        "keda_cached_metrics": s.keda_cached_metrics,
        "routing": "round robin over Ready pods",
    }
