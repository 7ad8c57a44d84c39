"""A pool's gateway, end to end on the local cluster: the operator renders it from the
pool, its models' ready replicas and the cluster's own signing keys; a real haproxy
stands for each gateway pod (e2e/gateway_pods.py) and a real tritonserver for each model
pod (e2e/monitoring.py); callers prove who they are with real ServiceAccount tokens the
API server issues for the gateway's audience.

KWOK runs no containers: the pods' network is simulated (their addresses become the
127.0.0.1 ports of the processes standing for them). Everything else is the real thing.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from e2e.gateway_pods import GatewayPods
from e2e.gateway_pods import service_account_token as token
from e2e.linear_model import BODY, linear_model
from e2e.monitoring import PodBackers, Prometheus
from e2e.operator import OperatorProcess
from kubernetes import client

from shoal.render.gateway import DEFAULT_GATEWAY_NAMESPACE, audience, gateway_name
from tests.support.shoal_objects import Shoal, condition, wait_ready
from tests.support.wait import wait_for

INFER = "/v2/models/linear/infer"


def infer(url: str, bearer: str | None, **headers: str) -> httpx.Response:
    sent = dict(headers)
    if bearer is not None:
        sent["Authorization"] = f"Bearer {bearer}"
    return httpx.post(url + INFER, json=BODY, headers=sent, timeout=10)


@pytest.fixture
def other_namespace(core: client.CoreV1Api, namespace: str) -> Iterator[str]:
    name = f"{namespace[:50]}-b"
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))
    yield name
    core.delete_namespace(name)


def _model(pool: str, replicas: int = 1) -> dict[str, Any]:
    body = linear_model(5, 1, pool=pool, scaling={"minReplicas": replicas, "maxReplicas": 3})
    del body["metadata"]["namespace"]
    return body


def test_a_request_goes_through_the_pools_gateway(
    api: client.ApiClient,
    operator: OperatorProcess,
    core: client.CoreV1Api,
    namespace: str,
    other_namespace: str,
    tmp_path: Path,
) -> None:
    shoal = Shoal(api)
    with shoal.pool([namespace, other_namespace], gpus=8) as pool:
        shoal.patch(
            "TenantPool",
            pool,
            {"spec": {"gateway": {"replicas": 1}, "access": {"allowSameNamespace": False}}},
        )
        shoal.create(_model(pool), namespace)
        model = wait_ready(shoal, namespace, "linear")
        host = f"{gateway_name(pool)}.{DEFAULT_GATEWAY_NAMESPACE}.svc"
        assert model["status"]["endpoints"]["gateway"] == f"http://{host}:8000/v2/models/linear"

        targets = Prometheus(tmp_path / "unused-prometheus")  # file_sd targets only
        targets.workdir.mkdir(parents=True)
        backers = PodBackers.for_rendered(core, namespace, "linear", targets, tmp_path)
        gateways = GatewayPods(
            core, pool, DEFAULT_GATEWAY_NAMESPACE, tmp_path / "gateways", [backers]
        ).start()
        try:
            status = wait_for(
                "the pool to report its gateway ready",
                lambda: shoal.get("TenantPool", pool).get("status") or {},
                lambda s: (s.get("gateway") or {}).get("readyReplicas") == 1,
                timeout=90,
            )
            assert status["gateway"]["audience"] == audience(pool)
            assert condition({"status": status}, "GatewayReady")["status"] == "True"
            mine = token(core, namespace, audience(pool))

            def first_url() -> str:
                urls = gateways.urls()
                assert urls, f"no gateway replica runs yet: {gateways.errors[-3:]}"
                return urls[0]

            url = wait_for(
                "the gateway to route to the model's replica",
                first_url,
                lambda u: infer(u, mine).status_code == 200,
                timeout=120,
                interval=1,
            )
            reply = infer(url, mine, **{"X-Request-ID": "req-42"})
            assert reply.status_code == 200, reply.text
            assert reply.headers["X-Request-ID"] == "req-42"
            assert reply.json()["outputs"][0]["data"] == [0, 1, 2, 3]

            # Who is calling is proven, not claimed.
            assert infer(url, None).status_code == 401
            assert infer(url, token(core, namespace, "another-audience")).status_code == 401
            forged = mine[:-8] + ("AAAAAAAA" if not mine.endswith("AAAAAAAA") else "BBBBBBBB")
            assert infer(url, forged).status_code == 401
            assert infer(url, mine, **{"X-Shoal-Tenant": other_namespace}).status_code == 200
            # Another tenant of the same pool reaches only its own models.
            theirs = token(core, other_namespace, audience(pool))
            assert infer(url, theirs).status_code == 404
            # A namespace the pool does not admit is refused at the door.
            stranger = token(core, "default", audience(pool))
            assert infer(url, stranger).status_code == 403

            # Replicas join the gateway's servers as they become ready, without a failed
            # request.
            failures: list[int] = []
            sent = [0]
            stop = threading.Event()

            def load() -> None:
                with httpx.Client(timeout=10) as http:
                    while not stop.is_set():
                        code = http.post(
                            url + INFER, json=BODY, headers={"Authorization": f"Bearer {mine}"}
                        ).status_code
                        sent[0] += 1
                        if code != 200:
                            failures.append(code)

            worker = threading.Thread(target=load, daemon=True)
            worker.start()
            shoal.patch(
                "InferenceModel", "linear", {"spec": {"scaling": {"minReplicas": 2}}}, namespace
            )
            config = wait_for(
                "the gateway's configuration to name both replicas",
                lambda: (
                    core.read_namespaced_config_map(
                        gateway_name(pool), DEFAULT_GATEWAY_NAMESPACE
                    ).data
                    or {}
                ),
                lambda d: d.get("haproxy.cfg", "").count(":8000 maxconn") == 2,
                timeout=90,
            )
            assert config
            wait_for(
                "both tritonservers to serve through the gateway",
                lambda: [s.metrics_url for s in backers.servers.values()],
                lambda urls: len(urls) == 2 and all(_successes(u) > 0 for u in urls),
                timeout=90,
                interval=1,
            )
            time.sleep(1)
            stop.set()
            worker.join(15)
            assert sent[0] > 50
            assert not failures, f"{len(failures)} of {sent[0]} failed: {failures[:10]}"
            assert not gateways.errors, gateways.errors
        finally:
            gateways.stop()
            backers.stop()


def _successes(metrics_url: str) -> float:
    text = httpx.get(metrics_url, timeout=5).text
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith("nv_inference_request_success{")
    )
