"""Desired state is the whole truth: what Shoal stops wanting disappears from the
cluster, from a child's fields and from status alike; what cannot be served says so
with a kstatus-readable Stalled condition."""

from __future__ import annotations

from pathlib import Path

from e2e.operator import OperatorProcess, running_operator
from kubernetes import client

from shoal.render.autoscaler import P95_METRIC, QUEUE_METRIC
from tests.support.shoal_objects import (
    Shoal,
    batch_policy,
    condition,
    inference_model,
    wait_ready,
    wait_reason,
)
from tests.support.wait import wait_for


def metrics(hpa: client.V2HorizontalPodAutoscaler) -> list[client.V2MetricSpec]:
    """The HPA's metrics: Shoal always writes at least the queue-depth one."""
    assert hpa.spec.metrics is not None, hpa.spec
    return hpa.spec.metrics


def test_removing_a_pools_replica_quota_removes_it_from_the_quota(
    api: client.ApiClient, operator: OperatorProcess, namespace: str
) -> None:
    """The review's reproduction: quota.replicas 8 puts pods: 8 into the namespace's
    ResourceQuota; removing it must remove pods from the quota."""
    shoal = Shoal(api)
    core = client.CoreV1Api(api)
    with shoal.pool([namespace]) as pool:
        shoal.patch("TenantPool", pool, {"spec": {"quota": {"replicas": 8}}})
        quota = wait_for(
            "pods: 8 in the quota",
            lambda: core.read_namespaced_resource_quota(f"shoal-pool-{pool}", namespace),
            lambda q: (q.spec.hard or {}).get("pods") == "8",
            timeout=30,
        )
        assert quota.spec.hard is not None  # the wait above saw pods: "8" in it
        assert quota.spec.hard["requests.nvidia.com/gpu"] == "8"
        shoal.patch("TenantPool", pool, {"spec": {"quota": {"replicas": None}}})
        quota = wait_for(
            "pods to leave the quota",
            lambda: core.read_namespaced_resource_quota(f"shoal-pool-{pool}", namespace),
            lambda q: "pods" not in (q.spec.hard or {}),
            timeout=30,
        )
        assert quota.spec.hard == {"requests.nvidia.com/gpu": "8"}


def test_removing_the_p95_target_removes_the_hpa_metric(
    api: client.ApiClient, operator: OperatorProcess, namespace: str
) -> None:
    shoal = Shoal(api)
    autoscaling = client.AutoscalingV2Api(api)
    with shoal.pool([namespace]) as pool:
        body = inference_model("tail", pool)
        body["spec"]["scaling"]["targetP95Latency"] = "200ms"
        shoal.create(body, namespace)
        hpa = wait_for(
            "the P95 metric in the HPA",
            lambda: autoscaling.read_namespaced_horizontal_pod_autoscaler("tail", namespace),
            lambda h: P95_METRIC in names(h),
            timeout=60,
        )
        others = names(hpa) - {P95_METRIC}
        assert QUEUE_METRIC in others
        shoal.patch(
            "InferenceModel", "tail", {"spec": {"scaling": {"targetP95Latency": None}}}, namespace
        )
        hpa = wait_for(
            "the P95 metric to go",
            lambda: autoscaling.read_namespaced_horizontal_pod_autoscaler("tail", namespace),
            lambda h: P95_METRIC not in names(h),
            timeout=60,
        )
        assert names(hpa) == others


def names(hpa: client.V2HorizontalPodAutoscaler) -> set[str]:
    """The names of the HPA's custom metrics."""
    out = set()
    for metric in metrics(hpa):
        source = metric.pods if metric.type == "Pods" else metric.object
        out.add(source.metric.name)
    return out


def test_status_keys_that_no_longer_apply_are_removed(
    api: client.ApiClient, operator: OperatorProcess, namespace: str
) -> None:
    """A served model shows its replicas and endpoints; once its pool stops admitting its
    namespace it is Stalled, and shows no endpoints or replicas of a stack it no longer
    serves from."""
    shoal = Shoal(api)
    with shoal.pool([namespace]) as pool:
        shoal.create(inference_model("blocked", pool), namespace)
        served = wait_ready(shoal, namespace, "blocked")
        assert {"endpoints", "replicas", "readyReplicas", "warmPool"} <= set(served["status"])
        assert condition(served, "Stalled")["status"] == "False"
        assert condition(served, "Reconciling")["status"] == "False"
        shoal.patch("TenantPool", pool, {"spec": {"tenants": {"namespaces": ["elsewhere"]}}})
        refused = wait_reason(shoal, namespace, "blocked", "NamespaceNotAdmitted")
        status = refused["status"]
        assert not {"endpoints", "replicas", "readyReplicas", "warmPool"} & set(status), status
        stalled = condition(refused, "Stalled")
        assert (stalled["status"], stalled["reason"]) == ("True", "NamespaceNotAdmitted")
        assert condition(refused, "Reconciling")["status"] == "False"
        shoal.delete("InferenceModel", "blocked", namespace)


def test_a_terminal_error_is_stalled_and_clears_when_fixed(
    api: client.ApiClient, operator: OperatorProcess, namespace: str
) -> None:
    """Warm-up batches above the policy's maximum cannot be served: Stalled=True with
    the reason (kstatus: Failed); fixing the policy clears it."""
    shoal = Shoal(api)
    with shoal.pool([namespace]) as pool:
        shoal.create(batch_policy("small", maxBatchSize=2), namespace)
        body = inference_model("warm", pool, policy="small")
        body["spec"]["model"]["inputs"] = [{"name": "x", "dataType": "FP32", "dims": [4]}]
        body["spec"]["model"]["warmup"] = {"batchSizes": [8]}
        shoal.create(body, namespace)
        stuck = wait_reason(shoal, namespace, "warm", "InvalidBatching")
        assert condition(stuck, "Stalled")["status"] == "True"
        assert condition(stuck, "Stalled")["reason"] == "InvalidBatching"
        shoal.patch("BatchPolicy", "small", {"spec": {"maxBatchSize": 8}}, namespace)
        fixed = wait_ready(shoal, namespace, "warm")
        assert condition(fixed, "Stalled")["status"] == "False"


def test_an_operator_watching_some_namespaces_lists_only_those(
    api: client.ApiClient,
    operator: OperatorProcess,
    operator_kubeconfig: Path,
    core: client.CoreV1Api,
    namespace: str,
    tmp_path: Path,
) -> None:
    """`shoal run` for two namespaces: its resync and its liveness probe count only
    the models there, not one in a third namespace (the session's cluster-wide operator
    serves them all meanwhile)."""
    import httpx

    from tests.support.passes import operator_counters

    shoal = Shoal(api)
    extra = [f"{namespace[:50]}-w{i}" for i in range(2)]
    for name in extra:
        core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))
    try:
        with shoal.pool([namespace, *extra]) as pool:
            for ns in [namespace, *extra]:
                shoal.create(inference_model("counted", pool), ns)
            env = {"SHOAL_NAMESPACES": ",".join(extra)}
            with running_operator(operator_kubeconfig, tmp_path / "log", env=env) as scoped:
                counters = wait_for(
                    "the scoped operator's resync",
                    lambda: operator_counters(scoped.metrics_url),
                    lambda c: c.get("shoal_resyncs_total", 0) >= 2,
                    timeout=60,
                )
                assert counters['shoal_managed_objects{kind="InferenceModel"}'] == 2
                health = httpx.get(scoped.health_url, timeout=10).json()
                assert health["watch"] == 2, health
            for ns in extra:
                wait_ready(shoal, ns, "counted")
    finally:
        for name in extra:
            core.delete_namespace(name)
