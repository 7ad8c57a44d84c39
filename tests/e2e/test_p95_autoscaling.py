"""P95 latency drives the HPA, end to end on real parts.

The model's queue-depth target is set out of reach, so only its P95 target can ask for
replicas. Under load, Triton's own latency summary (``nv_inference_request_summary_us``,
quantile 0.95) rises over the target; the real Prometheus records it with the shipped
rules (the largest P95 of any replica), the real prometheus-adapter serves it as an
Object metric on the model's Service, and the real HPA controller scales the Deployment
the operator made. Each Running pod is backed by a real tritonserver (KWOK runs no
containers).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from e2e.hpa import readings
from e2e.linear_model import BODY, linear_model
from e2e.monitoring import LoadGenerator, PodBackers, Prometheus
from e2e.operator import OperatorProcess
from kubernetes import client

from shoal.render.autoscaler import P95_METRIC, QUEUE_METRIC
from tests.support.scale_up import readings_at_scale_up
from tests.support.shoal_objects import Shoal, wait_ready
from tests.support.wait import wait_for

# Out of reach: 32 clients never leave this many requests waiting per replica.
TARGET_QUEUE = 1000
# One request alone takes about 22 ms (20 ms + 2 ms per item); under load, batches
# grow and requests wait for them, so the P95 passes this well before the queue could.
TARGET_P95_MS = 60


def _model(pool: str) -> dict[str, Any]:
    scaling = {
        "minReplicas": 1,
        "maxReplicas": 3,
        "targetQueueDepth": TARGET_QUEUE,
        "targetP95Latency": f"{TARGET_P95_MS}ms",
    }
    body = linear_model(20, 2, pool=pool, gpus=1, scaling=scaling)
    del body["metadata"]["namespace"]
    return body


def test_p95_latency_over_target_scales_a_model_up(
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
        shoal.create(_model(pool), namespace)
        wait_ready(shoal, namespace, "linear")
        hpa = scaling.read_namespaced_horizontal_pod_autoscaler("linear", namespace)
        names = {m.object.metric.name for m in hpa.spec.metrics if m.type == "Object"}
        assert P95_METRIC in names, hpa.spec.metrics
        backers = PodBackers.for_rendered(core, namespace, "linear", pipeline, tmp_path)
        load: LoadGenerator | None = None
        try:
            wait_for(
                "the HPA to read the queue depth",
                lambda: readings(
                    scaling.read_namespaced_horizontal_pod_autoscaler("linear", namespace)
                ),
                lambda r: QUEUE_METRIC in r,
                timeout=90,
                interval=1,
            )
            load = LoadGenerator(backers.http_urls, "linear", clients=32, body=BODY).start()
            seen = readings_at_scale_up(api, "linear", namespace, timeout=120, interval=0.5)
            # What it scaled on: the P95 over its target, the queue far under its own.
            assert seen[P95_METRIC] > TARGET_P95_MS / 1000, seen
            assert seen[QUEUE_METRIC] < TARGET_QUEUE, seen
            load.stop()
            assert load.failed == 0, f"{load.failed} of {load.sent} requests failed"
        finally:
            if load is not None:
                load.stop()
            backers.stop()
