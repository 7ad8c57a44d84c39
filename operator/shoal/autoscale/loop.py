"""The predictive loop: every few seconds, for each model with ``spec.scaling.predictive``,
the replicas its forecast demand needs, published for the HPA.

One round reads everything it needs in four range queries for all models at once (the
arrival rate over the last hours, and each replica's batches, requests and compute time
over the last minutes), then runs shoal.autoscale.predict per model: the same code the
autoscaling replay measures. The result goes to the operator's own metrics
(``shoal_model_required_replicas``, an object metric on the model's Service once
Prometheus scrapes the operator and prometheus-adapter serves it) and to the model's
status on its next periodic pass. A round that cannot reach Prometheus publishes nothing
new: the figures go stale, and the HPA, missing one metric, scales on the others and
never down.
"""

from __future__ import annotations

import contextlib
import logging
import time
from typing import Any

from prometheus_api_client.exceptions import PrometheusApiClientException
from pydantic import ValidationError
from requests.exceptions import RequestException

from shoal.api.batchpolicy import BatchPolicy
from shoal.api.common import parse_object
from shoal.api.constants import MODEL_LABEL
from shoal.api.inferencemodel import InferenceModel
from shoal.autoscale.predict import (
    DEFAULT_ERROR_WINDOW_S,
    DEFAULT_METRIC_LAG_S,
    ForecastConfig,
    RateHistory,
    estimate_capacity,
    forecast_demand,
    required_replicas,
    warm_pool_replicas,
)
from shoal.autoscale.predictions import ModelKey, Prediction
from shoal.autoscale.signals import (
    batch_observations,
    batch_settings,
    cold_start_seconds,
    rate_histories,
)
from shoal.kube.client import ApiError
from shoal.state import Operator
from shoal.telemetry import CAPACITY, COLD_START, FORECAST_RATE, REQUIRED_REPLICAS

log = logging.getLogger(__name__)

PREDICT_SECONDS = 15.0
# Enough for the forecast to score its own past forecasts over the error window.
HISTORY_SECONDS = DEFAULT_ERROR_WINDOW_S + 900.0
CAPACITY_SECONDS = 900.0
# A model's pods are listed for its cold start at most this often.
COLD_START_REFRESH_SECONDS = 60.0
# The cold start assumed before any pod of the model was seen to start.
DEFAULT_COLD_START_SECONDS = 60.0


def predictive_models(op: Operator) -> list[tuple[InferenceModel, dict[str, Any] | None]]:
    """The served models that ask for predictive scaling, with their BatchPolicy."""
    out = []
    for body in op.cache.all("InferenceModel"):
        predictive = ((body.get("spec") or {}).get("scaling") or {}).get("predictive") or {}
        if not predictive.get("enabled"):
            continue
        try:
            model = parse_object(InferenceModel, body)
        except ValidationError:
            continue
        namespace = model.metadata.namespace or ""
        policy = None
        if model.spec.batch_policy is not None:
            policy = op.cache.get("BatchPolicy", model.spec.batch_policy.name, namespace)
        out.append((model, policy))
    return out


def _cold_start(op: Operator, key: ModelKey, now: float) -> float | None:
    known = op.predictions.cold_start(key)
    if known is not None and now - known[0] < COLD_START_REFRESH_SECONDS:
        return known[1]
    namespace, name = key
    try:
        pods = op.kube.list("v1", "Pod", namespace, labels=f"{MODEL_LABEL}={name}")
    except ApiError as exc:
        log.warning("listing the pods of %s/%s failed: %s", namespace, name, exc.reason)
        return known[1] if known else None
    measured = cold_start_seconds(pods)
    seconds = measured if measured is not None else (known[1] if known else None)
    op.predictions.set_cold_start(key, now, seconds)
    return seconds


def predict_round(op: Operator, now: float | None = None) -> None:
    """One round over every predictive model; publishes and records what it found."""
    if op.metrics is None:
        return
    models = predictive_models(op)
    wall = time.time() if now is None else now
    end = float(int(wall // PREDICT_SECONDS * PREDICT_SECONDS))
    step = PREDICT_SECONDS
    latest: dict[ModelKey, Prediction] = {}
    if models:
        try:
            rates = rate_histories(
                op.metrics.matrix("shoal:arrival_rate:model", end - HISTORY_SECONDS, end, step),
                end - HISTORY_SECONDS,
                end,
                step,
            )
            executions, inferences, compute = (
                op.metrics.matrix(series, end - CAPACITY_SECONDS, end, step)
                for series in (
                    "shoal:execution_rate:pod",
                    "shoal:inference_rate:pod",
                    "shoal:compute_seconds_rate:pod",
                )
            )
            counters = batch_observations(executions, inferences, compute, step)
        except (PrometheusApiClientException, RequestException, ValueError, KeyError) as exc:
            log.warning("predictive scaling: reading Prometheus failed: %s", exc)
            return
        for model, policy_body in models:
            key = (model.metadata.namespace or "", model.metadata.name)
            try:
                policy = parse_object(BatchPolicy, policy_body).spec if policy_body else None
                settings = batch_settings(model, policy)
            except (ValidationError, ValueError):
                continue  # the model's own status says what is wrong with its batching
            cold = _cold_start(op, key, time.monotonic())
            horizon = (cold if cold is not None else DEFAULT_COLD_START_SECONDS) + (
                DEFAULT_METRIC_LAG_S
            )
            history = rates.get(key) or RateHistory(step_s=step, rates=(0.0,))
            forecast = forecast_demand(history, ForecastConfig(horizon_s=horizon))
            before = op.predictions.get(key)
            capacity = estimate_capacity(
                counters.get(key, []), settings, before.capacity if before else None
            )
            required: int | None = None
            warm_pool: int | None = None
            predictive = model.spec.scaling.predictive
            assert predictive is not None  # predictive_models() kept only these
            if capacity is not None:
                warm_pool = warm_pool_replicas(
                    forecast,
                    capacity,
                    min_replicas=model.spec.scaling.min_replicas,
                    max_replicas=model.spec.scaling.max_replicas,
                )
                required = required_replicas(
                    forecast,
                    capacity,
                    predictive.headroom_percent / 100,
                    min_replicas=0,
                    max_replicas=model.spec.scaling.max_replicas,
                )
            elif forecast.demand == 0:
                required = 0  # nothing to serve: no replica needed, whatever one sustains
            latest[key] = Prediction(forecast.demand, capacity, required, cold, warm_pool)
    publish(op.predictions.keys(), latest)
    op.predictions.replace(latest)


def publish(before: set[ModelKey], latest: dict[ModelKey, Prediction]) -> None:
    """Set the operator's gauges to ``latest``; remove the series of models no longer
    predicted, so that none goes on publishing a stale count."""
    for key in before - set(latest):
        for gauge in (FORECAST_RATE, CAPACITY, COLD_START):
            _remove(gauge, *key)
        _remove(REQUIRED_REPLICAS, *key)
    for (namespace, name), found in latest.items():
        FORECAST_RATE.labels(namespace, name).set(found.forecast_rate)
        if found.capacity is not None:
            CAPACITY.labels(namespace, name).set(found.capacity.per_replica_rps)
        if found.cold_start_s is not None:
            COLD_START.labels(namespace, name).set(found.cold_start_s)
        if found.required is not None:
            REQUIRED_REPLICAS.labels(namespace, name).set(found.required)
        else:
            _remove(REQUIRED_REPLICAS, namespace, name)


def _remove(gauge: Any, *labels: str) -> None:
    with contextlib.suppress(KeyError):
        gauge.remove(*labels)
