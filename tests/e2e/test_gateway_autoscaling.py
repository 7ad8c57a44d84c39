"""The gateway's queue drives the HPA: demand that Triton's own queue cannot show.

The gateway lets at most two batches per replica through to Triton (``maxconn``); the
rest waits at the gateway. So with every replica busy, Triton's queue depth per pod
reaches at most a target the gateway's queue is far over, and only the gateway's signal can
ask for more replicas. Real parts throughout: a real haproxy per gateway pod and a real
tritonserver per model pod (KWOK runs no containers), scraped by a real Prometheus with
the shipped rules, served to the real HPA controller by a real prometheus-adapter with
the shipped configuration.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from e2e.gateway_pods import GatewayPods, service_account_token
from e2e.hpa import readings
from e2e.linear_model import BODY, linear_model
from e2e.monitoring import LoadGenerator, PodBackers, Prometheus
from e2e.operator import OperatorProcess
from kubernetes import client

from shoal.render.autoscaler import GATEWAY_QUEUE_METRIC, QUEUE_METRIC
from shoal.render.gateway import DEFAULT_GATEWAY_NAMESPACE, audience
from tests.support.scale_up import readings_at_scale_up
from tests.support.shoal_objects import Shoal, batch_policy, wait_ready
from tests.support.wait import wait_for

MAX_BATCH = 4
# Triton holds at most 2 x MAX_BATCH requests of a replica: its pending count per pod
# reaches this target at most (both batches waiting), however long the gateway's queue
# is, and at the target the HPA asks for no more replicas (ceil(1 x 8 / 8) = 1).
TARGET_QUEUE = 2 * MAX_BATCH
CLIENTS = 48


def _model(pool: str) -> dict[str, Any]:
    scaling = {"minReplicas": 1, "maxReplicas": 3, "targetQueueDepth": TARGET_QUEUE}
    body = linear_model(20, 2, pool=pool, scaling=scaling)
    body["spec"]["batchPolicy"] = {"name": "small"}
    del body["metadata"]["namespace"]
    return body


def test_the_gateways_queue_scales_a_model_tritons_queue_cannot(
    api: client.ApiClient,
    operator: OperatorProcess,
    core: client.CoreV1Api,
    namespace: str,
    pipeline: Prometheus,
    tmp_path: Path,
) -> None:
    shoal = Shoal(api)
    scaling = client.AutoscalingV2Api(api)
    with shoal.pool([namespace], gpus=8) as pool:
        shoal.patch("TenantPool", pool, {"spec": {"gateway": {"replicas": 1}}})
        shoal.create(batch_policy("small", maxBatchSize=MAX_BATCH), namespace)
        shoal.create(_model(pool), namespace)
        wait_ready(shoal, namespace, "linear")
        backers = PodBackers.for_rendered(core, namespace, "linear", pipeline, tmp_path)
        gateways = GatewayPods(
            core,
            pool,
            DEFAULT_GATEWAY_NAMESPACE,
            tmp_path / "gateways",
            [backers],
            prometheus=pipeline,
        ).start()
        bearer = service_account_token(core, namespace, audience(pool))
        load: LoadGenerator | None = None
        try:
            wait_for(
                "the gateway to serve the model",
                gateways.urls,
                lambda urls: len(urls) == 1 and backers.http_urls() != [],
                timeout=120,
                interval=1,
            )
            # Before any load the metric exists, at 0: an HPA missing one of its
            # metrics would never scale down.
            wait_for(
                "the HPA to read all three metrics",
                lambda: readings(
                    scaling.read_namespaced_horizontal_pod_autoscaler("linear", namespace)
                ),
                lambda r: r.get(GATEWAY_QUEUE_METRIC) == 0 and QUEUE_METRIC in r,
                timeout=90,
                interval=1,
            )
            load = LoadGenerator(
                gateways.urls,
                "linear",
                clients=CLIENTS,
                body=BODY,
                headers={"Authorization": f"Bearer {bearer}"},
            ).start()
            seen = readings_at_scale_up(api, "linear", namespace, timeout=120, interval=0.5)
            # What it scaled on: the gateway's queue per replica, far over the target,
            # while Triton's own stayed under it.
            assert seen[GATEWAY_QUEUE_METRIC] > TARGET_QUEUE, seen
            assert seen[QUEUE_METRIC] <= TARGET_QUEUE, seen
            # The per-model figures come from the gateway's own series, named back to
            # the model: everything the clients sent went through it.
            rate = f'{{namespace="{namespace}",inferencemodel="linear",pool="{pool}"}}'
            wait_for(
                "the gateway's request rate for the model",
                lambda: pipeline.query(f"shoal:gateway_request_rate:model{rate}"),
                lambda series: len(series) == 1 and float(series[0]["value"][1]) > 20,
                timeout=60,
                interval=1,
            )
            load.stop()
            assert load.failed == 0, f"{load.failed} of {load.sent} requests failed"
            assert not gateways.errors, gateways.errors
        finally:
            if load is not None:
                load.stop()
            gateways.stop()
            backers.stop()
