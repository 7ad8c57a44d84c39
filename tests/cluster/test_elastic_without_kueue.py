"""A pool that asks for elastic capacity on a cluster without Kueue: today's hard
quotas still hold, and the pool's status says which mode it runs in and why.

Kueue is not installed here (tests/cluster/test_elastic_capacity.py installs it for its
own module only and removes it, CRDs included); the test first proves the API is gone.
"""

from __future__ import annotations

import uuid
from typing import Any

from e2e.operator import OperatorProcess
from kubernetes import client

from tests.support.shoal_objects import GROUP, VERSION, Shoal, condition, inference_model
from tests.support.wait import wait_for

QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
SHARED = {"nodeSelector": {"shoal.dev/node-group": "shared-gpu"}}


def kueue_served(api: client.ApiClient) -> bool:
    groups = client.ApisApi(api).get_api_versions().groups
    return any(g.name == "kueue.x-k8s.io" for g in groups)


def test_without_kueue_a_pool_keeps_its_hard_quotas_and_says_so(
    api: client.ApiClient,
    core: client.CoreV1Api,
    operator: OperatorProcess,
    namespace: str,
    gpu_nodes: list[client.V1Node],
) -> None:
    wait_for(
        "Kueue's API to be gone from the cluster",
        lambda: kueue_served(api),
        lambda served: not served,
        timeout=120,
    )
    shoal = Shoal(api)
    pool = f"hard-{uuid.uuid4().hex[:6]}"
    body: dict[str, Any] = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "TenantPool",
        "metadata": {"name": pool},
        "spec": {
            "isolation": "Shared",
            "tenants": {"namespaces": [namespace]},
            "placement": SHARED,
            "quota": {"gpus": 2},
            "capacity": {"gpus": 2, "cohort": f"c-{pool}", "borrowingLimit": 4},
        },
    }
    shoal.create(body)
    try:
        status = wait_for(
            "the pool to report hard-quota mode",
            lambda: shoal.get("TenantPool", pool),
            lambda p: ((p.get("status") or {}).get("capacity") or {}).get("mode") == "HardQuota",
            timeout=60,
        )
        assert status["status"]["capacity"]["nominalGpus"] == 2
        elastic = condition(status, "ElasticCapacity")
        assert elastic["status"] == "False"
        assert elastic["reason"] == "KueueNotInstalled"
        assert "kueue.x-k8s.io/v1beta2" in elastic["message"]

        # Two models of two and one replicas, two GPUs of quota in the namespace: the
        # per-namespace quota refuses the third pod; nothing borrows.
        shoal.create(inference_model("first", pool, min_replicas=2), namespace)
        apps = client.AppsV1Api(api)
        wait_for(
            "the first model's two replicas",
            lambda: apps.read_namespaced_deployment("first", namespace).status.ready_replicas,
            lambda ready: ready == 2,
            timeout=90,
        )
        shoal.create(inference_model("capped", pool, min_replicas=1), namespace)
        deployment = wait_for(
            "the second Deployment to hit the pool's GPU quota",
            lambda: apps.read_namespaced_deployment("capped", namespace),
            lambda d: any(
                c.type == "ReplicaFailure" and "exceeded quota" in (c.message or "")
                for c in d.status.conditions or []
            ),
            timeout=90,
        )
        template = deployment.spec.template
        assert QUEUE_LABEL not in (template.metadata.labels or {})
        assert template.spec.node_selector == SHARED["nodeSelector"]
        pods = [
            p
            for p in core.list_namespaced_pod(
                namespace, label_selector="shoal.dev/model=capped"
            ).items
            if p.metadata.deletion_timestamp is None
        ]
        assert pods == []
        wait_for(
            "the model to say its replicas are refused",
            lambda: condition(shoal.get("InferenceModel", "capped", namespace), "Degraded"),
            lambda c: c.get("reason") == "ReplicaFailure" and "exceeded quota" in c["message"],
            timeout=60,
        )
    finally:
        shoal.delete("InferenceModel", "first", namespace)
        shoal.delete("InferenceModel", "capped", namespace)
        shoal.delete("TenantPool", pool)
