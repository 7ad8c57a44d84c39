"""The predictive loop: every few seconds, for each model with ``spec.scaling.predictive``,
the replicas its forecast demand needs, published for the HPA.

One round reads everything it needs in four range queries for all models at once (the
arrival rate over the last hours, and each replica's batches, requests and compute time
over the last minutes), then runs shoal.autoscale.predict per model: the same code the
autoscaling replay measures (shoal.reconcile.predictive_round). The result goes to the
operator's own metrics (``shoal_model_required_replicas``, an object metric on the
model's Service once Prometheus scrapes the operator and prometheus-adapter serves it)
and to the model's status on its next periodic pass. A round that cannot reach
Prometheus publishes nothing new: the figures go stale, and the HPA, missing one metric,
scales on the others and never down.
"""

from __future__ import annotations

import contextlib
import time
from typing import Any

from pydantic import ValidationError

from shoal.api.common import parse_object
from shoal.api.inferencemodel import InferenceModel
from shoal.autoscale.predictions import ModelKey, Prediction
from shoal.state import Operator
from shoal.telemetry import CAPACITY, COLD_START, FORECAST_RATE, REQUIRED_REPLICAS

PREDICT_SECONDS = 15.0


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


def predict_round(op: Operator, now: float | None = None) -> None:
    """One round over every predictive model; publishes and records what it found."""
    if op.metrics is None:
        return
    models = predictive_models(op)
    wall = time.time() if now is None else now
    end = float(int(wall // PREDICT_SECONDS * PREDICT_SECONDS))
    latest: dict[ModelKey, Prediction] = {}
    if models:
        # Here, not at the top: the forecast's numpy loads only once a model asks for
        # predictive scaling, not into every operator's memory.
        from shoal.reconcile.predictive_round import predictions_for

        found = predictions_for(op, models, end, PREDICT_SECONDS)
        if found is None:
            return
        latest = found
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
