"""The operator turns an InferenceModel into a running Triton stack, and keeps it so.

Runs the real operator process against the real control plane; KWOK plays the
kubelets of the simulated GPU nodes (pods become Running without a container runtime).
"""

from __future__ import annotations

import time
import uuid
from typing import Any

from e2e.operator import OperatorProcess
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests.support.passes import wait_for_passes
from tests.support.shoal_objects import (
    Shoal,
    batch_policy,
    condition,
    inference_model,
    wait_ready,
    wait_reason,
)
from tests.support.wait import wait_for

CHILDREN = ("ConfigMap", "Deployment", "Service", "PodDisruptionBudget", "HorizontalPodAutoscaler")


def children(api: client.ApiClient, namespace: str, name: str) -> dict[str, Any]:
    """The model's children by kind; None for each that does not exist."""
    core, apps = client.CoreV1Api(api), client.AppsV1Api(api)
    policy, autoscaling = client.PolicyV1Api(api), client.AutoscalingV2Api(api)
    readers = {
        "ConfigMap": lambda: core.read_namespaced_config_map(f"{name}-model-config", namespace),
        "Deployment": lambda: apps.read_namespaced_deployment(name, namespace),
        "Service": lambda: core.read_namespaced_service(name, namespace),
        "PodDisruptionBudget": lambda: policy.read_namespaced_pod_disruption_budget(
            name, namespace
        ),
        "HorizontalPodAutoscaler": lambda: autoscaling.read_namespaced_horizontal_pod_autoscaler(
            name, namespace
        ),
    }
    out: dict[str, Any] = {}
    for kind, read in readers.items():
        try:
            out[kind] = read()
        except ApiException as exc:
            if exc.status != 404:
                raise
            out[kind] = None
    return out


def events_for(
    api: client.ApiClient, namespace: str, name: str
) -> list[tuple[str | None, str | None]]:
    items = (
        client.CoreV1Api(api)
        .list_namespaced_event(namespace, field_selector=f"involvedObject.name={name}")
        .items
    )
    return [(e.type, e.reason) for e in items]


def test_a_model_becomes_a_ready_triton_stack(
    api: client.ApiClient, operator: OperatorProcess, namespace: str
) -> None:
    shoal = Shoal(api)
    with shoal.pool([namespace]) as pool:
        shoal.create(batch_policy("fast"), namespace)
        shoal.create(inference_model("linear", pool, "fast", min_replicas=2), namespace)
        wait_ready(shoal, namespace, "linear")
        # Ready as soon as one replica serves; the HPA then fills the warm pool.
        model = wait_for(
            "the warm pool of 2 ready replicas",
            lambda: shoal.get("InferenceModel", "linear", namespace),
            lambda m: (m.get("status") or {}).get("readyReplicas") == 2,
            timeout=60,
        )

        kids = children(api, namespace, "linear")
        assert all(kids[k] is not None for k in CHILDREN), kids
        for kind in CHILDREN:
            refs = kids[kind].metadata.owner_references
            assert refs[0].kind == "InferenceModel", kind
            assert refs[0].uid == model["metadata"]["uid"], kind
        status = model["status"]
        assert status["replicas"] == 2
        assert status["readyReplicas"] == 2
        assert status["endpoints"]["http"] == f"http://linear.{namespace}.svc:8000"
        assert condition(model, "Degraded")["status"] == "False"
        assert condition(model, "Ready")["observedGeneration"] == model["metadata"]["generation"]

        pods = (
            client.CoreV1Api(api)
            .list_namespaced_pod(namespace, label_selector="shoal.dev/model=linear")
            .items
        )
        assert len(pods) == 2
        for pod in pods:
            assert pod.status.phase == "Running"
            assert pod.spec.node_name is not None  # it is Running
            node = client.CoreV1Api(api).read_node(pod.spec.node_name)
            assert node.metadata.labels is not None
            assert node.metadata.labels["shoal.dev/node-group"] == "shared-gpu"
            assert pod.spec.priority_class_name == f"shoal-pool-{pool}"
        config = kids["ConfigMap"].data["config.pbtxt"]
        assert "max_queue_delay_microseconds: 2000" in config
        assert ("Normal", "Available") in events_for(api, namespace, "linear")


def test_deleting_a_model_cascades_to_its_children(
    api: client.ApiClient, operator: OperatorProcess, namespace: str
) -> None:
    shoal = Shoal(api)
    with shoal.pool([namespace]) as pool:
        shoal.create(inference_model("gone", pool), namespace)
        wait_ready(shoal, namespace, "gone")
        shoal.delete("InferenceModel", "gone", namespace)
        wait_for(
            "the garbage collector to remove every child",
            lambda: {k: v is not None for k, v in children(api, namespace, "gone").items()},
            lambda present: not any(present.values()),
            timeout=60,
        )


def test_an_admin_edit_to_a_managed_field_is_repaired(
    api: client.ApiClient, operator: OperatorProcess, namespace: str
) -> None:
    shoal = Shoal(api)
    apps, core = client.AppsV1Api(api), client.CoreV1Api(api)
    with shoal.pool([namespace]) as pool:
        shoal.create(inference_model("drift", pool), namespace)
        wait_ready(shoal, namespace, "drift")
        # An admin changes Triton's args and adds an annotation of their own.
        apps.patch_namespaced_deployment(
            "drift",
            namespace,
            {
                "metadata": {"annotations": {"team.example/owner": "alice"}},
                "spec": {
                    "template": {
                        "spec": {
                            "containers": [
                                {
                                    "name": "triton",
                                    "args": ["tritonserver", "--model-repository=/tmp"],
                                }
                            ]
                        }
                    }
                },
            },
        )
        core.delete_namespaced_service("drift", namespace)
        started = time.monotonic()

        def repaired(kids: dict[str, Any]) -> bool:
            deployment, service = kids["Deployment"], kids["Service"]
            return (
                service is not None
                and "--load-model=drift" in deployment.spec.template.spec.containers[0].args
            )

        kids = wait_for(
            "drift repaired", lambda: children(api, namespace, "drift"), repaired, timeout=30
        )
        print(f"drift repaired in {time.monotonic() - started:.1f}s")
        # The admin's own annotation is not Shoal's to remove.
        assert kids["Deployment"].metadata.annotations.get("team.example/owner") == "alice"


def _our_write_times(api: client.ApiClient, namespace: str, name: str) -> dict[str, Any]:
    out = {}
    for kind, obj in children(api, namespace, name).items():
        out[kind] = sorted(
            (m.operation, str(m.time), m.subresource or "")
            for m in obj.metadata.managed_fields or []
            if m.manager == "shoal-operator"
        )
    return out


def test_a_no_op_resync_writes_nothing(
    api: client.ApiClient, operator: OperatorProcess, namespace: str
) -> None:
    shoal = Shoal(api)
    with shoal.pool([namespace]) as pool:
        shoal.create(inference_model("steady", pool), namespace)
        wait_ready(shoal, namespace, "steady")
        wait_for_passes(operator.metrics_url, rounds=2)  # the rollout's last events settle
        before_model = shoal.get("InferenceModel", "steady", namespace)["metadata"]
        before = _our_write_times(api, namespace, "steady")
        assert all(before.values()), before
        wait_for_passes(operator.metrics_url, rounds=3)
        after_model = shoal.get("InferenceModel", "steady", namespace)["metadata"]
        assert after_model["resourceVersion"] == before_model["resourceVersion"]
        assert _our_write_times(api, namespace, "steady") == before


def test_the_deployments_replicas_belong_to_the_autoscaler(
    api: client.ApiClient, operator: OperatorProcess, namespace: str
) -> None:
    shoal = Shoal(api)
    with shoal.pool([namespace]) as pool:
        shoal.create(inference_model("scaled", pool, min_replicas=2), namespace)
        wait_ready(shoal, namespace, "scaled")
        # The HPA controller raises the Deployment to the warm pool through /scale.
        deployment = wait_for(
            "the HPA controller to set replicas to the warm pool",
            lambda: client.AppsV1Api(api).read_namespaced_deployment("scaled", namespace),
            lambda d: d.spec.replicas == 2,
            timeout=60,
        )
        owners = {
            m.manager: str(m.fields_v1.get("f:spec", {}))
            for m in deployment.metadata.managed_fields
        }
        assert "shoal-operator" in owners
        assert "f:replicas" not in owners["shoal-operator"]


def test_a_missing_batch_policy_is_reported_then_healed(
    api: client.ApiClient, operator: OperatorProcess, namespace: str
) -> None:
    shoal = Shoal(api)
    with shoal.pool([namespace]) as pool:
        shoal.create(inference_model("waiting", pool, "later"), namespace)
        model = wait_reason(shoal, namespace, "waiting", "BatchPolicyNotFound", timeout=30)
        assert "BatchPolicy" in condition(model, "Ready")["message"]
        assert children(api, namespace, "waiting")["Deployment"] is None
        assert ("Warning", "BatchPolicyNotFound") in events_for(api, namespace, "waiting")
        shoal.create(batch_policy("later"), namespace)
        wait_ready(shoal, namespace, "waiting", timeout=60)


def test_a_missing_pool_is_reported_then_healed(
    api: client.ApiClient, operator: OperatorProcess, namespace: str
) -> None:
    shoal = Shoal(api)
    pool = f"late-{uuid.uuid4().hex[:8]}"
    shoal.create(inference_model("orphan", pool), namespace)
    wait_reason(shoal, namespace, "orphan", "TenantPoolNotFound", timeout=30)
    from tests.support.shoal_objects import shared_pool

    shoal.create(shared_pool(pool, [namespace]))
    try:
        wait_ready(shoal, namespace, "orphan", timeout=60)
    finally:
        shoal.delete("InferenceModel", "orphan", namespace)
        shoal.delete("TenantPool", pool)


def test_a_batch_policy_change_reaches_its_models(
    api: client.ApiClient, operator: OperatorProcess, namespace: str
) -> None:
    shoal = Shoal(api)
    core = client.CoreV1Api(api)
    with shoal.pool([namespace]) as pool:
        shoal.create(batch_policy("tuned"), namespace)
        for name in ("first", "second"):
            shoal.create(inference_model(name, pool, "tuned"), namespace)
        for name in ("first", "second"):
            wait_ready(shoal, namespace, name)
        shoal.patch("BatchPolicy", "tuned", {"spec": {"maxQueueDelay": "7ms"}}, namespace)
        for name in ("first", "second"):
            # A def: mypy cannot infer a lambda with a default argument as a Callable[[], T].
            def config_text(n: str = name) -> str:
                data = core.read_namespaced_config_map(f"{n}-model-config", namespace).data
                assert data is not None, f"ConfigMap {n}-model-config has no data"
                return data["config.pbtxt"]

            wait_for(
                f"{name}'s config to carry the new delay",
                config_text,
                lambda text: "max_queue_delay_microseconds: 7000" in text,
                timeout=30,
            )
        policy = wait_for(
            "the policy to count its models",
            lambda: shoal.get("BatchPolicy", "tuned", namespace),
            lambda p: (p.get("status") or {}).get("models") == 2,
            timeout=30,
        )
        assert condition(policy, "Ready")["status"] == "True"


def test_an_unschedulable_model_says_why(
    api: client.ApiClient, operator: OperatorProcess, namespace: str
) -> None:
    shoal = Shoal(api)
    with shoal.pool([namespace], gpus=64) as pool:
        shoal.create(inference_model("huge", pool, gpus=16), namespace)
        model = wait_reason(shoal, namespace, "huge", "Unschedulable", timeout=60)
        assert "Insufficient nvidia.com/gpu" in condition(model, "Ready")["message"]
