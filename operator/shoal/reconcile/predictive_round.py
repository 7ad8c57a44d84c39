"""One predictive round's figures for the models that ask for predictive scaling: the
four range queries for all of them at once, then shoal.autoscale.predict per model (the
same code the autoscaling replay measures). Imported by the loop only when such a model
exists, so numpy stays out of an operator that has none.
"""

from __future__ import annotations

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
    forecast_config,
    rate_histories,
)
from shoal.kube.client import ApiError
from shoal.state import Operator

log = logging.getLogger(__name__)

# Enough for the forecast to score its own past forecasts over the error window, with
# the cool-down credited in full while cold start + metric lag + cool-down stay within
# 15 minutes (beyond that, in part: less credit, more headroom).
HISTORY_SECONDS = DEFAULT_ERROR_WINDOW_S + 900.0
CAPACITY_SECONDS = 900.0
# A model's pods are listed for its cold start at most this often.
COLD_START_REFRESH_SECONDS = 60.0
# The cold start assumed before any pod of the model was seen to start.
DEFAULT_COLD_START_SECONDS = 60.0


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


def predictions_for(
    op: Operator,
    models: list[tuple[InferenceModel, dict[str, Any] | None]],
    end: float,
    step: float,
) -> dict[ModelKey, Prediction] | None:
    """Each model's prediction at ``end`` from histories sampled every ``step``
    seconds; None when Prometheus cannot be read (nothing new is published)."""
    metrics = op.metrics
    if metrics is None:
        return None
    latest: dict[ModelKey, Prediction] = {}
    try:
        rates = rate_histories(
            metrics.matrix("shoal:arrival_rate:model", end - HISTORY_SECONDS, end, step),
            end - HISTORY_SECONDS,
            end,
            step,
        )
        executions, inferences, compute = (
            metrics.matrix(series, end - CAPACITY_SECONDS, end, step)
            for series in (
                "shoal:execution_rate:pod",
                "shoal:inference_rate:pod",
                "shoal:compute_seconds_rate:pod",
            )
        )
        counters = batch_observations(executions, inferences, compute, step)
    except (PrometheusApiClientException, RequestException, ValueError, KeyError) as exc:
        log.warning("predictive scaling: reading Prometheus failed: %s", exc)
        return None
    for model, policy_body in models:
        key = (model.metadata.namespace or "", model.metadata.name)
        try:
            policy = parse_object(BatchPolicy, policy_body).spec if policy_body else None
            settings = batch_settings(model, policy)
        except (ValidationError, ValueError):
            continue  # the model's own status says what is wrong with its batching
        cold = _cold_start(op, key, time.monotonic())
        config = forecast_config(model, cold if cold is not None else DEFAULT_COLD_START_SECONDS)
        history = rates.get(key) or RateHistory(step_s=step, rates=(0.0,))
        forecast = forecast_demand(history, config)
        before = op.predictions.get(key)
        capacity = estimate_capacity(
            counters.get(key, []), settings, before.capacity if before else None
        )
        required: int | None = None
        warm_pool: int | None = None
        predictive = model.spec.scaling.predictive
        assert predictive is not None  # predictive_models() kept only these
        # The model's HPA ceiling as its pass planned it (the pool's quota and GPUs
        # included); the spec's maximum until the first pass.
        ceiling = op.predictions.ceiling(key) or model.spec.scaling.max_replicas
        if capacity is not None:
            warm_pool = warm_pool_replicas(
                forecast,
                capacity,
                min_replicas=model.spec.scaling.min_replicas,
                max_replicas=ceiling,
            )
            required = required_replicas(
                forecast,
                capacity,
                predictive.headroom_percent / 100,
                min_replicas=0,
                max_replicas=ceiling,
            )
        elif forecast.demand == 0:
            required = 0  # nothing to serve: no replica needed, whatever one sustains
        latest[key] = Prediction(forecast.demand, capacity, required, cold, warm_pool)
    return latest
