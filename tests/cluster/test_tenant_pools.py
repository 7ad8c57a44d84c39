"""TenantPools on the real control plane: quotas, admission, placement, preemption,
and a deletion that waits for the pool's last model."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from e2e.operator import OperatorProcess
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests.support.shoal_objects import (
    Shoal,
    condition,
    inference_model,
    ready,
    shared_pool,
    wait_ready,
    wait_reason,
)
from tests.support.wait import wait_for

GPU = "nvidia.com/gpu"


def gpu_pod(name: str, priority_class: str, gpus: int, node: str | None = None) -> client.V1Pod:
    spec = client.V1PodSpec(
        priority_class_name=priority_class,
        containers=[
            client.V1Container(
                name="main",
                image="registry.invalid/placeholder:1",
                resources=client.V1ResourceRequirements(
                    requests={GPU: str(gpus)}, limits={GPU: str(gpus)}
                ),
            )
        ],
    )
    if node:
        spec.node_selector = {"kubernetes.io/hostname": node}
    return client.V1Pod(metadata=client.V1ObjectMeta(name=name), spec=spec)


@contextmanager
def extra_namespace(core: client.CoreV1Api, prefix: str) -> Iterator[str]:
    name = f"{prefix}-{uuid.uuid4().hex[:5]}"
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))
    try:
        yield name
    finally:
        core.delete_namespace(name)


def pool_status(shoal: Shoal, name: str) -> dict[str, Any]:
    return shoal.get("TenantPool", name).get("status") or {}


def test_a_pool_puts_quota_and_network_policies_in_its_namespaces(
    api: client.ApiClient, operator: OperatorProcess, namespace: str, core: client.CoreV1Api
) -> None:
    shoal = Shoal(api)
    net = client.NetworkingV1Api(api)
    with extra_namespace(core, "t-by-label") as other, shoal.pool([namespace]) as pool:
        wait_for(
            "the pool to admit its namespace",
            lambda: pool_status(shoal, pool),
            lambda s: s.get("admittedNamespaces") == [namespace],
            timeout=30,
        )
        quota = core.read_namespaced_resource_quota(f"shoal-pool-{pool}", namespace)
        assert quota.spec.hard == {f"requests.{GPU}": "8"}
        names = {p.metadata.name for p in net.list_namespaced_network_policy(namespace).items}
        assert {f"shoal-{pool}-default-deny", f"shoal-{pool}-allow-dns"} <= names

        # Admit the second namespace by the immutable name label; then release the first.
        shoal.patch(
            "TenantPool",
            pool,
            {
                "spec": {
                    "tenants": {
                        "namespaces": None,
                        "selector": {
                            "matchExpressions": [
                                {
                                    "key": "kubernetes.io/metadata.name",
                                    "operator": "In",
                                    "values": [other],
                                }
                            ]
                        },
                    }
                }
            },
        )
        wait_for(
            "the pool to follow its new tenants",
            lambda: pool_status(shoal, pool),
            lambda s: s.get("admittedNamespaces") == [other],
            timeout=30,
        )
        wait_for(
            "the released namespace to lose the pool's objects",
            lambda: [q.metadata.name for q in core.list_namespaced_resource_quota(namespace).items],
            lambda names: f"shoal-pool-{pool}" not in names,
            timeout=30,
        )
        assert core.read_namespaced_resource_quota(f"shoal-pool-{pool}", other)


def test_a_pod_beyond_the_pools_gpu_quota_is_refused(
    api: client.ApiClient, operator: OperatorProcess, namespace: str, core: client.CoreV1Api
) -> None:
    shoal = Shoal(api)
    with shoal.pool([namespace], gpus=2) as pool:
        wait_for(
            "the quota",
            lambda: [q.metadata.name for q in core.list_namespaced_resource_quota(namespace).items],
            lambda names: f"shoal-pool-{pool}" in names,
            timeout=30,
        )
        core.create_namespaced_pod(namespace, gpu_pod("first", f"shoal-pool-{pool}", 2))
        with pytest.raises(ApiException) as refused:
            core.create_namespaced_pod(namespace, gpu_pod("second", f"shoal-pool-{pool}", 1))
        assert refused.value.status == 403
        assert refused.value.body is not None
        assert "exceeded quota" in refused.value.body
        assert f"requests.{GPU}" in refused.value.body


def refusal(shoal: Shoal, model: dict[str, Any], namespace: str) -> ApiException:
    """The API server's refusal of ``model``. The admission policy sees a new pool a
    moment after it is created (its informer catches up), so a create that still goes
    through is undone and tried again."""

    def attempt() -> ApiException | None:
        try:
            shoal.create(model, namespace)
        except ApiException as exc:
            return exc
        shoal.delete("InferenceModel", model["metadata"]["name"], namespace)
        return None

    refused = wait_for(
        "the API server to refuse the model", attempt, lambda e: e is not None, timeout=20
    )
    assert refused is not None  # what wait_for waited for
    return refused


def test_the_api_server_refuses_models_the_pool_does_not_admit(
    api: client.ApiClient, operator: OperatorProcess, namespace: str
) -> None:
    shoal = Shoal(api)
    with shoal.pool(["somebody-else"]) as pool:
        refused = refusal(shoal, inference_model("intruder", pool), namespace)
        assert refused.status == 403
        assert refused.body is not None
        assert f"spec.pool: TenantPool {pool} does not admit namespace {namespace}" in (
            refused.body
        )
    with shoal.pool([namespace], gpus=2) as pool:
        refused = refusal(shoal, inference_model("greedy", pool, min_replicas=3), namespace)
        assert refused.body is not None
        assert "spec.scaling.minReplicas: the warm pool needs 3 GPUs" in refused.body


def test_a_model_a_pool_stops_admitting_says_so(
    api: client.ApiClient, operator: OperatorProcess, namespace: str
) -> None:
    shoal = Shoal(api)
    with shoal.pool([namespace]) as pool:
        shoal.create(inference_model("evicted", pool), namespace)
        wait_ready(shoal, namespace, "evicted")
        shoal.patch("TenantPool", pool, {"spec": {"tenants": {"namespaces": ["elsewhere"]}}})
        model = wait_reason(shoal, namespace, "evicted", "NamespaceNotAdmitted", timeout=30)
        assert "does not admit namespace" in condition(model, "Ready")["message"]


def test_a_dedicated_pools_models_run_only_on_its_nodes(
    api: client.ApiClient, operator: OperatorProcess, namespace: str, core: client.CoreV1Api
) -> None:
    shoal = Shoal(api)
    pool = f"dedicated-{uuid.uuid4().hex[:6]}"
    body = shared_pool(pool, [namespace])
    body["spec"]["isolation"] = "Dedicated"
    body["spec"]["placement"] = {
        "nodeSelector": {"shoal.dev/node-group": "dedicated-gpu"},
        "tolerations": [
            {
                "key": "shoal.dev/dedicated",
                "operator": "Equal",
                "value": "true",
                "effect": "NoSchedule",
            }
        ],
    }
    shoal.create(body)
    try:
        shoal.create(inference_model("critical", pool, min_replicas=3), namespace)
        pods = wait_for(
            "3 Running pods",
            lambda: (
                core.list_namespaced_pod(namespace, label_selector="shoal.dev/model=critical").items
            ),
            lambda ps: len(ps) == 3 and all(p.status.phase == "Running" for p in ps),
            timeout=90,
        )
        for pod in pods:
            assert pod.spec.node_name is not None  # it is Running
            node = core.read_node(pod.spec.node_name)
            assert node.metadata.labels is not None
            assert node.metadata.labels["shoal.dev/node-group"] == "dedicated-gpu"
            assert pod.spec.priority == 100_000
    finally:
        shoal.delete("InferenceModel", "critical", namespace)
        shoal.delete("TenantPool", pool)


def test_a_dedicated_pod_preempts_shared_pods_when_gpus_run_out(
    api: client.ApiClient, operator: OperatorProcess, namespace: str, core: client.CoreV1Api
) -> None:
    """Both pools burst onto one node; when its GPUs run out the scheduler evicts the
    shared (sheddable) pods to place the dedicated one."""
    shoal = Shoal(api)
    node = "gpu-shared-2"
    burst = f"burst-{uuid.uuid4().hex[:6]}"
    body = shared_pool(burst, [namespace], gpus=8)
    body["spec"]["isolation"] = "Dedicated"
    body["spec"]["placement"] = {"nodeSelector": {"kubernetes.io/hostname": node}}
    shoal.create(body)
    try:
        with shoal.pool([namespace], gpus=8) as shared:
            for pc in (f"shoal-pool-{shared}", f"shoal-pool-{burst}"):
                # A def: mypy cannot infer a lambda with a default argument as a Callable[[], T].
                def priority_class(pc: str = pc) -> client.V1PriorityClass:
                    return client.SchedulingV1Api(api).read_priority_class(pc)

                wait_for(
                    f"PriorityClass {pc}",
                    priority_class,
                    lambda p: p is not None,
                    timeout=30,
                )
            used = 0
            for p in core.list_pod_for_all_namespaces(field_selector=f"spec.nodeName={node}").items:
                assert p.status is not None  # a stored pod has both
                assert p.spec is not None
                if p.status.phase in ("Running", "Pending"):
                    for c in p.spec.containers:
                        assert c.resources is not None  # the API server sends at least {}
                        used += int((c.resources.requests or {}).get(GPU, 0))
            free = 8 - used
            assert free >= 2, f"only {free} GPUs free on {node}"
            for i in range(free):
                core.create_namespaced_pod(
                    namespace, gpu_pod(f"shared-{i}", f"shoal-pool-{shared}", 1, node)
                )
            wait_for(
                f"{free} shared pods Running on {node}",
                lambda: [p.status.phase for p in core.list_namespaced_pod(namespace).items],
                lambda phases: phases.count("Running") == free,
                timeout=60,
            )
            core.create_namespaced_pod(
                namespace, gpu_pod("dedicated", f"shoal-pool-{burst}", 2, node)
            )
            wait_for(
                "the dedicated pod to preempt its way onto the node",
                lambda: core.read_namespaced_pod("dedicated", namespace).status.phase,
                lambda phase: phase == "Running",
                timeout=90,
            )
            left = [
                p.metadata.name
                for p in core.list_namespaced_pod(namespace).items
                if p.metadata.name.startswith("shared-") and not p.metadata.deletion_timestamp
            ]
            assert len(left) <= free - 2, left
    finally:
        shoal.delete("TenantPool", burst)


def test_deleting_a_pool_in_use_waits_for_its_last_model(
    api: client.ApiClient, operator: OperatorProcess, namespace: str
) -> None:
    shoal = Shoal(api)
    pool = f"leaving-{uuid.uuid4().hex[:6]}"
    shoal.create(shared_pool(pool, [namespace]))
    shoal.create(inference_model("tenant", pool), namespace)
    wait_ready(shoal, namespace, "tenant")
    # Protection starts once the operator has seen the pool and put its finalizer on it.
    wait_for(
        "the operator's finalizer on the pool",
        lambda: shoal.get("TenantPool", pool)["metadata"].get("finalizers") or [],
        lambda finalizers: "shoal.dev/pool-in-use" in finalizers,
        timeout=30,
    )
    shoal.delete("TenantPool", pool)
    blocked = wait_for(
        "Ready=False DeletionBlocked on the pool",
        lambda: shoal.get("TenantPool", pool),
        lambda p: condition(p, "Ready").get("reason") == "DeletionBlocked",
        timeout=30,
    )
    assert f"{namespace}/tenant" in condition(blocked, "Ready")["message"]
    assert ready(shoal.get("InferenceModel", "tenant", namespace))  # still serving
    shoal.delete("InferenceModel", "tenant", namespace)

    def gone() -> bool:
        try:
            shoal.get("TenantPool", pool)
        except ApiException as exc:
            return exc.status == 404
        return False

    wait_for("the pool to go once unused", gone, lambda g: g, timeout=60)
