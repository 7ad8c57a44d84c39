"""What the predictor is fed, from what Prometheus and the API server answer (pure).

Prometheus answers range queries as matrices, one series per label set, with gaps where
a series did not exist; the predictor wants one rate per step, idle steps as zeros, and
per-replica counter increments. A pod's cold start is read from its own timestamps.
"""

from __future__ import annotations

import datetime as dt
import statistics
from collections.abc import Iterable, Sequence
from typing import Any

from shoal.api.batchpolicy import BatchPolicySpec
from shoal.api.common import parse_duration
from shoal.api.inferencemodel import InferenceModel
from shoal.autoscale.predict import (
    DEFAULT_METRIC_LAG_S,
    BatchCounters,
    BatchSettings,
    ForecastConfig,
    RateHistory,
)
from shoal.render.batching import effective_batching
from shoal.render.pods import ready_condition

ModelKey = tuple[str, str]  # (namespace, name)
# A model without a P95 target plans on its largest batch: any latency is acceptable.
NO_LATENCY_TARGET_S = 3600.0


def _key(labels: dict[str, str]) -> ModelKey | None:
    namespace, model = labels.get("namespace"), labels.get("inferencemodel")
    return (namespace, model) if namespace and model else None


def _grid(start: float, end: float, step: float) -> int:
    return round((end - start) / step) + 1


def rate_histories(
    matrix: Sequence[dict[str, Any]], start: float, end: float, step: float
) -> dict[ModelKey, RateHistory]:
    """Each model's arrival rate on the grid ``start..end`` by ``step`` (epoch seconds):
    a step without a sample is idle (0), not unknown; a NaN (a rate over no time) too."""
    size = _grid(start, end, step)
    out: dict[ModelKey, RateHistory] = {}
    for series in matrix:
        key = _key(series.get("metric") or {})
        if key is None:
            continue
        rates = [0.0] * size
        for stamp, value in series.get("values") or []:
            index = round((float(stamp) - start) / step)
            number = float(value)
            if 0 <= index < size and number == number and number >= 0:
                rates[index] = max(rates[index], number)
        out[key] = RateHistory(step_s=step, rates=tuple(rates))
    return out


def batch_observations(
    executions: Sequence[dict[str, Any]],
    inferences: Sequence[dict[str, Any]],
    compute: Sequence[dict[str, Any]],
    step: float,
) -> dict[ModelKey, list[BatchCounters]]:
    """Per-pod rates of batches, requests and compute seconds, turned into one
    increment per pod and step (rate * step), grouped by model. A point counts only
    where all three series have it."""

    def by_pod(matrix: Sequence[dict[str, Any]]) -> dict[tuple[str, str, str], dict[float, float]]:
        out: dict[tuple[str, str, str], dict[float, float]] = {}
        for series in matrix:
            labels = series.get("metric") or {}
            key = _key(labels)
            if key is None or not labels.get("pod"):
                continue
            points = out.setdefault((*key, labels["pod"]), {})
            for stamp, value in series.get("values") or []:
                number = float(value)
                if number == number:
                    points[float(stamp)] = number
        return out

    runs, items, seconds = by_pod(executions), by_pod(inferences), by_pod(compute)
    grouped: dict[ModelKey, list[BatchCounters]] = {}
    for pod, points in runs.items():
        for stamp, rate in points.items():
            if stamp in items.get(pod, {}) and stamp in seconds.get(pod, {}):
                grouped.setdefault(pod[:2], []).append(
                    BatchCounters(
                        executions=rate * step,
                        inferences=items[pod][stamp] * step,
                        compute_s=seconds[pod][stamp] * step,
                    )
                )
    return grouped


def _time(text: str | None) -> dt.datetime | None:
    if not text:
        return None
    return dt.datetime.fromisoformat(text.replace("Z", "+00:00"))


def cold_start_seconds(pods: Iterable[dict[str, Any]]) -> float | None:
    """The median time the pods took from created to Ready (first Ready: a pod Ready
    since it started; one that flapped later says little about starting)."""
    took = []
    for pod in pods:
        created = _time((pod.get("metadata") or {}).get("creationTimestamp"))
        cond = ready_condition(pod)
        ready = _time(cond.get("lastTransitionTime")) if cond else None
        if created and ready and ready >= created:
            took.append((ready - created).total_seconds())
    return statistics.median(took) if took else None


def batch_settings(model: InferenceModel, policy: BatchPolicySpec | None) -> BatchSettings:
    """What bounds a replica's throughput: the batch the model's batcher forms, the
    delay it waits for one, and the model's P95 target. Raises ValueError where the
    model's batching is invalid (its status says so)."""
    batching = effective_batching(model, policy)
    target = model.spec.scaling.target_p95_latency
    return BatchSettings(
        max_batch_size=batching.max_batch_size,
        max_queue_delay_s=parse_duration(batching.max_queue_delay),
        target_p95_s=parse_duration(target) if target else NO_LATENCY_TARGET_S,
    )


def forecast_config(model: InferenceModel, cold_start_s: float) -> ForecastConfig:
    """How far ahead to forecast the model's demand (its cold start plus the metric lag)
    and how long its HPA holds a count it was asked for (its scale-down window), which
    the learned error credits."""
    return ForecastConfig(
        horizon_s=cold_start_s + DEFAULT_METRIC_LAG_S,
        cool_down_s=parse_duration(model.spec.scaling.scale_down.stabilization_window),
    )
