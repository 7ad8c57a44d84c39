"""One replay: a workload, an autoscaler, the replicas, second by second.

Each simulated second: the metric pipeline takes the samples due (scrapes, rule runs,
metrics-server), the autoscaler decides (HPA syncs every 15 s, KPA ticks every 2 s, the
oracle follows its plan), the Deployment creates or deletes pods, then the second's
arrivals are routed and every replica runs its batches up to the end of the second.
Control actions therefore happen on whole seconds, which is finer than any of the
autoscalers' own clocks. After the last window the replicas drain so that every request
that arrived is scored.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from benchmarks.autoscaling.cluster import Cluster, Pod, PodTiming
from benchmarks.autoscaling.pipeline import CpuModel, Pipeline, PipelineConfig
from benchmarks.autoscaling.replica import BatcherConfig
from benchmarks.autoscaling.scalers import Scaler
from benchmarks.autoscaling.slo import WindowScore, reversals, score_windows
from benchmarks.autoscaling.workload import WINDOW_S, Workload

DRAIN_LIMIT_S = 900


@dataclass(frozen=True)
class SimConfig:
    batcher: BatcherConfig
    timing: PodTiming
    initial_replicas: int
    slo_target_s: float
    cpu: CpuModel = field(default_factory=CpuModel)
    pipeline: PipelineConfig = field(default_factory=PipelineConfig)


@dataclass(frozen=True)
class RunResult:
    scaler: str
    knob: float | None
    replica_seconds: float
    score: WindowScore
    reversals: int
    peak_replicas: int
    scale_events: int

    @property
    def attainment(self) -> float:
        return self.score.attainment

    def summary(self) -> dict[str, Any]:
        return {
            "scaler": self.scaler,
            "knob": self.knob,
            "replica_seconds": round(self.replica_seconds),
            "attainment_pct": round(100 * self.attainment, 2),
            "violation_minutes": self.score.violation_minutes,
            "scale_reversals": self.reversals,
            "peak_replicas": self.peak_replicas,
            "scale_events": self.scale_events,
        }


def _record(
    per_window: list[list[npt.NDArray[np.float64]]],
    started: list[float],
    ends: list[float],
    sizes: list[int],
) -> npt.NDArray[np.float64]:
    """File the latencies of the requests that started this second under the window of
    their arrival; returns them in the order given."""
    arrivals = np.array(started)
    latency = np.repeat(np.array(ends), sizes) - arrivals
    first, last = int(arrivals[0] // WINDOW_S), int(arrivals[-1] // WINDOW_S)
    windows = len(per_window)
    if first == last:
        if first < windows:
            per_window[first].append(latency)
        return latency
    window = (arrivals // WINDOW_S).astype(np.int64)
    for w in range(first, min(last, windows - 1) + 1):
        per_window[w].append(latency[window == w])
    return latency


def simulate(
    workload: Workload, scaler: Scaler, config: SimConfig, knob: float | None = None
) -> RunResult:
    """Replay the workload against the scaler; deterministic for given inputs."""
    arrivals = workload.arrivals
    horizon = round(workload.horizon_s)
    bounds = np.searchsorted(arrivals, np.arange(horizon + 1, dtype=np.float64)).tolist()
    cluster = Cluster(config.batcher, config.timing, config.initial_replicas)
    pipeline = Pipeline(config.pipeline)
    cpu = config.cpu
    track_p95 = config.pipeline.track_p95
    per_window: list[list[npt.NDArray[np.float64]]] = [[] for _ in range(workload.windows)]
    peak = config.initial_replicas
    empty = arrivals[:0]
    t = 0
    while True:
        if t < horizon:
            pipeline.collect(t, cluster)
            desired = scaler.decide(t, cluster, pipeline)
            if desired is not None:
                cluster.scale_to(desired, float(t))
                peak = max(peak, desired)
            chunk = arrivals[bounds[t] : bounds[t + 1]]
        elif t >= horizon + DRAIN_LIMIT_S or all(p.replica.idle_at(float(t)) for p in cluster.pods):
            break
        else:
            chunk = empty
        started: list[float] = []
        ends: list[float] = []
        sizes: list[int] = []
        owners: list[tuple[Pod, int, int]] = []  # each pod's slice of the step's requests
        for pod, step in cluster.step(chunk, float(t), float(t + 1), t < horizon):
            pod.pending = step.pending
            pod.last_step_concurrency = step.concurrency_area
            pod.cpu_seconds += (
                cpu.idle_cores
                + cpu.per_request_s * len(step.started)
                + cpu.per_batch_s * len(step.sizes)
            )
            if step.sizes:
                if track_p95:
                    owners.append((pod, len(started), len(started) + len(step.started)))
                started.extend(step.started)
                ends.extend(step.ends)
                sizes.extend(step.sizes)
        for pod in cluster.pods:
            if pod.running(t) and not t >= pod.ready_at:
                pod.cpu_seconds += cpu.loading_cores
        if started:
            latency = _record(per_window, started, ends, sizes)
            for pod, lo, hi in owners:
                pod.recent_latencies.append((float(t + 1), latency[lo:hi]))
        t += 1
    return RunResult(
        scaler=scaler.name,
        knob=knob,
        replica_seconds=cluster.replica_seconds,
        score=score_windows(per_window, config.slo_target_s),
        reversals=reversals(cluster.history),
        peak_replicas=peak,
        scale_events=len(cluster.history) - 1,
    )
