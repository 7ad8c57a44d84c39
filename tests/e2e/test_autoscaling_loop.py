"""The whole autoscaling loop, closed, on real parts.

Prometheus scrapes real tritonserver processes that stand for the model's pods (one per
Running pod, see e2e/monitoring.py); prometheus-adapter serves the queue depth as the
custom metrics API; the real HPA controller scales the Deployment the operator made;
KWOK starts the new pods and each gets its own real server, so added replicas really
drain the queue. A load step raises queue depth: the HPA scales up; when load stops it
scales down after the cool-down, never below the warm pool.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from e2e.cluster.local import HPA_SYNC_PERIOD
from e2e.cluster.target import Target
from e2e.linear_model import BODY, linear_model
from e2e.monitoring import SCRAPE_INTERVAL, LoadGenerator, PodBackers, Prometheus
from e2e.operator import OperatorProcess
from kubernetes import client

from shoal.metrics.reader import MetricsReader
from tests.support.hpa_syncs import wait_for_hpa_syncs
from tests.support.shoal_objects import Shoal, wait_ready
from tests.support.wait import wait_for

TARGET_QUEUE = 4
COOL_DOWN = "20s"


def model(pool: str) -> dict[str, Any]:
    scaling = {
        "minReplicas": 1,
        "maxReplicas": 4,
        "targetQueueDepth": TARGET_QUEUE,
        "scaleDown": {"stabilizationWindow": COOL_DOWN},
    }
    body = linear_model(20, 2, pool=pool, gpus=1, scaling=scaling)
    del body["metadata"]["namespace"]
    return body


def test_queue_depth_scales_up_then_back_to_the_warm_pool(
    api: client.ApiClient,
    kube_target: Target,
    operator: OperatorProcess,
    namespace: str,
    pipeline: Prometheus,
    tmp_path: Path,
) -> None:
    shoal = Shoal(api)
    core, apps = client.CoreV1Api(api), client.AppsV1Api(api)
    with shoal.pool([namespace]) as pool:
        shoal.create(model(pool), namespace)
        wait_ready(shoal, namespace, "linear")
        # The config the operator rendered, as each pod would mount it.
        backers = PodBackers.for_rendered(core, namespace, "linear", pipeline, tmp_path)
        load: LoadGenerator | None = None
        try:
            wait_for(
                "Prometheus to record the pod's queue depth",
                lambda: pipeline.query(f'shoal:queue_depth:pod{{namespace="{namespace}"}}'),
                lambda series: len(series) == 1,
                timeout=60,
            )

            def replicas() -> int:
                count = apps.read_namespaced_deployment("linear", namespace).spec.replicas
                assert count is not None  # the API server defaults it
                return int(count)

            step = time.monotonic()
            load = LoadGenerator(backers.http_urls, "linear", clients=32, body=BODY).start()
            wait_for("the HPA to scale up", replicas, lambda r: r > 1, timeout=120, interval=0.5)
            scaled_up = time.monotonic() - step

            def queue_per_pod() -> float:
                series = pipeline.query(f'shoal:queue_depth:pod{{namespace="{namespace}"}}')
                values = [float(s["value"][1]) for s in series]
                return sum(values) / max(len(values), 1) if len(values) > 1 else 1e9

            wait_for(
                "the queue to recover below target",
                queue_per_pod,
                lambda q: q <= TARGET_QUEUE,
                timeout=120,
                interval=0.5,
            )
            recovered = time.monotonic() - step
            peak = replicas()
            # What the operator shows in status, read the way it reads it.
            figures = wait_for(
                "the model's figures in Prometheus",
                lambda: MetricsReader(pipeline.url).figures(namespace, "linear"),
                lambda f: {"p95Seconds", "averageBatchSize", "requestRate"} <= set(f.values),
                timeout=30,
            )
            assert figures.error is None
            assert figures.values["requestRate"] > 10
            assert figures.values["averageBatchSize"] > 1
            assert 0.02 < figures.values["p95Seconds"] < 5
            load.stop()
            assert load.failed == 0, f"{load.failed} of {load.sent} requests failed"

            stopped = time.monotonic()
            lowest = peak
            while time.monotonic() - stopped < 120:
                current = replicas()
                lowest = min(lowest, current)
                if current == 1:
                    break
                time.sleep(0.5)
            scaled_down = time.monotonic() - stopped
            assert lowest == 1, f"did not return to the warm pool (lowest {lowest})"
            # Looked at again by the HPA controller: it stays at the warm pool, never below.
            wait_for_hpa_syncs(kube_target, api, rounds=2)
            assert replicas() == 1
        finally:
            if load is not None:
                load.stop()
            backers.stop()
        print(
            f"\nautoscaling (HPA sync {HPA_SYNC_PERIOD}, scrape {SCRAPE_INTERVAL}, "
            f"cool-down {COOL_DOWN}): load step to scale-up decision {scaled_up:.1f}s, "
            f"to queue recovered {recovered:.1f}s at {peak} replicas; load stop to warm "
            f"pool {scaled_down:.1f}s; {load.sent} requests, 0 failed"
        )
        assert scaled_down >= 15  # the cool-down held the replicas


def test_an_unreachable_prometheus_is_reported_not_raised() -> None:
    from e2e.cluster.local import free_port

    figures = MetricsReader(f"http://127.0.0.1:{free_port()}", timeout=2).figures("ns", "m")
    assert figures.values == {}
    assert figures.error is not None
    assert "Connection" in figures.error
