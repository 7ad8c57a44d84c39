"""Predictive scaling end to end: the operator's forecast reaches the real HPA.

An operator configured with the real Prometheus runs its predictive loop for a model
with ``spec.scaling.predictive``: it reads the model's arrival rate and its replicas'
batch counters (recorded by the shipped rules from real tritonservers standing for the
pods), measures what one replica sustains, and publishes the replicas the forecast
needs. Prometheus scrapes the operator (``honor_labels``, as the shipped job), the real
prometheus-adapter serves the figure as an object metric on the model's Service, and the
real HPA controller scales on it while the reactive queue-depth target is out of reach.

The session's cluster-wide operator (no Prometheus) is paused meanwhile: serving the
same namespace, it would answer each status write of this test's operator within a
second with a status without the figures (it has no Prometheus to read them from), and
the test would see them only by chance.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from e2e.linear_model import BODY, linear_model
from e2e.monitoring import LoadGenerator, PodBackers, Prometheus
from e2e.operator import OperatorProcess, paused, running_operator
from kubernetes import client

from shoal.render.autoscaler import QUEUE_METRIC, REQUIRED_REPLICAS_METRIC
from tests.support.scale_up import readings_at_scale_up
from tests.support.shoal_objects import Shoal, batch_policy, wait_ready
from tests.support.wait import wait_for

# Out of reach of 24 clients: only the forecast can ask for replicas.
TARGET_QUEUE = 1000
MAX_BATCH = 4
CLIENTS = 24


def _model(pool: str) -> dict[str, Any]:
    scaling = {
        "minReplicas": 1,
        "maxReplicas": 4,
        "targetQueueDepth": TARGET_QUEUE,
        "predictive": {"enabled": True},
    }
    body = linear_model(20, 2, pool=pool, gpus=1, scaling=scaling)
    body["spec"]["batchPolicy"] = {"name": "small"}
    del body["metadata"]["namespace"]
    return body


def test_the_forecast_scales_a_model_its_queue_target_would_not(
    api: client.ApiClient,
    operator: OperatorProcess,
    operator_kubeconfig: Path,
    core: client.CoreV1Api,
    namespace: str,
    pipeline: Prometheus,
    tmp_path: Path,
) -> None:
    shoal = Shoal(api)
    settings = {"SHOAL_PROMETHEUS_URL": pipeline.url, "SHOAL_NAMESPACES": namespace}
    with (
        paused(operator),
        running_operator(operator_kubeconfig, tmp_path / "operator.log", env=settings) as op,
        shoal.pool([namespace], gpus=8) as pool,
    ):
        pipeline.scrape_operator(op.metrics_url)
        shoal.create(batch_policy("small", maxBatchSize=MAX_BATCH), namespace)
        shoal.create(_model(pool), namespace)
        wait_ready(shoal, namespace, "linear")
        backers = PodBackers.for_rendered(core, namespace, "linear", pipeline, tmp_path)
        load: LoadGenerator | None = None
        try:
            wait_for(
                "Prometheus to record the model's arrival rate",
                lambda: pipeline.query(f'shoal:arrival_rate:model{{namespace="{namespace}"}}'),
                lambda series: len(series) == 1,
                timeout=60,
            )
            load = LoadGenerator(backers.http_urls, "linear", clients=CLIENTS, body=BODY).start()
            seen = readings_at_scale_up(api, "linear", namespace, timeout=180, interval=1)
            # What it scaled on: the operator's required replicas, while Triton's queue
            # per replica stayed far under its own target.
            assert seen[REQUIRED_REPLICAS_METRIC] >= 2, seen
            assert seen[QUEUE_METRIC] < TARGET_QUEUE, seen
            # What the operator measured, in the model's status and its own metrics.
            status = wait_for(
                "the predictive figures in the model's status",
                lambda: shoal.get("InferenceModel", "linear", namespace).get("status"),
                lambda s: bool(s) and s.get("capacityPerReplica") and s.get("requiredReplicas"),
                timeout=90,
                interval=1,
            )
            assert status is not None  # the wait saw it
            assert status["capacityPerReplica"] > 0, status
            assert "coldStart" in status, status
            published = pipeline.query(
                f'shoal_model_capacity_per_replica{{namespace="{namespace}"}}'
            )
            assert len(published) == 1, published
            assert float(published[0]["value"][1]) > 0, published
            load.stop()
            assert load.failed == 0, f"{load.failed} of {load.sent} requests failed"
        finally:
            if load is not None:
                load.stop()
            backers.stop()
