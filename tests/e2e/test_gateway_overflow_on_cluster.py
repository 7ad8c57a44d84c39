"""The overflow end to end on the local cluster: the operator renders a model's twin in
the overflow pool and the model's pool's gateway sends it what the model's replica has
no slot for; the spill shows in Prometheus (the dashboard's series) and in the gateway
signal the model's own HPA reads.

Real parts throughout: a real haproxy per gateway pod and a real tritonserver per model
pod of both stacks (KWOK runs no containers: e2e/gateway_pods.py, e2e/monitoring.py),
scraped by a real Prometheus with the shipped rules, served to the real HPA controller
by a real prometheus-adapter with the shipped configuration. The throughput the spill
adds is measured in tests/e2e/test_gateway_overflow.py.
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

from shoal.render.autoscaler import GATEWAY_QUEUE_METRIC
from shoal.render.gateway import DEFAULT_GATEWAY_NAMESPACE, audience
from tests.support.shoal_objects import Shoal, batch_policy, condition, wait_ready
from tests.support.wait import wait_for

MAX_BATCH = 4
# The gateway lets 2 x MAX_BATCH requests through to each replica: 16 clients fill the
# model's one replica and its one overflow replica, and nothing waits in the queue.
CLIENTS = 4 * MAX_BATCH
# Out of reach: the model's HPA keeps its one replica whatever it reads.
TARGET_QUEUE = 1000


def _model(pool: str, spill: str) -> dict[str, Any]:
    scaling = {"minReplicas": 1, "maxReplicas": 2, "targetQueueDepth": TARGET_QUEUE}
    body = linear_model(20, 2, pool=pool, scaling=scaling)
    body["spec"]["batchPolicy"] = {"name": "small"}
    body["spec"]["overflow"] = {"pool": spill, "minReplicas": 1, "maxReplicas": 1}
    del body["metadata"]["namespace"]
    return body


def test_a_saturated_model_spills_to_its_overflow_replica_and_its_hpa_sees_it(
    api: client.ApiClient,
    operator: OperatorProcess,
    core: client.CoreV1Api,
    namespace: str,
    pipeline: Prometheus,
    tmp_path: Path,
) -> None:
    shoal = Shoal(api)
    scaling = client.AutoscalingV2Api(api)
    with shoal.pool([namespace], gpus=8) as own, shoal.pool([namespace], gpus=8) as spill:
        shoal.patch("TenantPool", own, {"spec": {"gateway": {"replicas": 1}}})
        shoal.create(batch_policy("small", maxBatchSize=MAX_BATCH), namespace)
        shoal.create(_model(own, spill), namespace)
        wait_ready(shoal, namespace, "linear")
        wait_for(
            "the overflow replica ready",
            lambda: condition(shoal.get("InferenceModel", "linear", namespace), "OverflowReady"),
            lambda c: c.get("status") == "True",
            timeout=90,
        )
        # Two models' backers: each lists its pods in a target file of its own.
        backers, twins = (
            PodBackers.for_rendered(
                core, namespace, name, pipeline, tmp_path / name, own_targets=True
            )
            for name in ("linear", "linear-overflow")
        )
        gateways = GatewayPods(
            core,
            own,
            DEFAULT_GATEWAY_NAMESPACE,
            tmp_path / "gateways",
            [backers, twins],
            prometheus=pipeline,
        ).start()
        bearer = service_account_token(core, namespace, audience(own))
        load: LoadGenerator | None = None
        try:
            wait_for(
                "the gateway to serve the model and its overflow replica",
                lambda: (gateways.urls(), backers.http_urls(), twins.http_urls()),
                lambda seen: all(len(urls) == 1 for urls in seen),
                timeout=120,
                interval=1,
            )
            load = LoadGenerator(
                gateways.urls,
                "linear",
                clients=CLIENTS,
                body=BODY,
                headers={"Authorization": f"Bearer {bearer}"},
            ).start()
            where = f'{{namespace="{namespace}",inferencemodel="linear",pool="{own}"}}'
            spilled = wait_for(
                "Prometheus to record the spill to the overflow replica",
                lambda: pipeline.query(f"shoal:gateway_spill_rate:model{where}"),
                lambda series: len(series) == 1 and float(series[0]["value"][1]) > 5,
                timeout=90,
                interval=1,
            )
            total = pipeline.query(f"shoal:gateway_request_rate:model{where}")
            # The spill is part of the model's demand, not a model of its own.
            assert float(total[0]["value"][1]) > float(spilled[0]["value"][1]), total
            assert not pipeline.query('shoal:gateway_request_rate:model{inferencemodel=""}')
            # The model's HPA reads the requests at its overflow replica as demand
            # waiting for it, though nothing waits in the gateway's queue.
            wait_for(
                "the model's HPA to read the spill in its gateway signal",
                lambda: readings(
                    scaling.read_namespaced_horizontal_pod_autoscaler("linear", namespace)
                ),
                lambda r: r.get(GATEWAY_QUEUE_METRIC, 0) >= 1,
                timeout=90,
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
            twins.stop()
