"""A model's overflow replicas on the real cluster with the real operator: refused while
the overflow pool does not admit the namespace, then a twin stack in that pool (its
PriorityClass, so its quota counts them), routed by the model's own pool's gateway, and
removed when spec.overflow is unset, or when the overflow pool withdraws the namespace
(its default-deny and quota staying while a twin pod is left). That the gateway spills
to them is shown on the real haproxy and tritonserver processes in
tests/e2e/test_gateway_overflow.py."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from e2e.operator import OperatorProcess
from kubernetes import client

from shoal.render.gateway import DEFAULT_GATEWAY_NAMESPACE, gateway_name
from shoal.render.names import pool_priority_class
from tests.support.passes import wait_for_passes
from tests.support.shoal_objects import Shoal, condition, inference_model
from tests.support.wait import wait_for

IM = "InferenceModel"
TWIN = "ranker-overflow"


def _overflow(shoal: Shoal, namespace: str) -> tuple[dict[str, Any], dict[str, Any]]:
    model = shoal.get(IM, "ranker", namespace)
    return condition(model, "OverflowReady"), (model.get("status") or {}).get("overflow") or {}


def _refused(shoal: Shoal, namespace: str, reason: str, awaited: str) -> dict[str, Any]:
    """Wait for OverflowReady=False with ``reason`` and no status.overflow; the condition."""
    refused, status = wait_for(
        awaited,
        lambda: _overflow(shoal, namespace),
        lambda seen: seen[0].get("reason") == reason,
        timeout=60,
    )
    assert refused["status"] == "False", refused
    assert status == {}, status
    return refused


def _gateway_config(core: client.CoreV1Api, pool: str) -> str:
    found = core.read_namespaced_config_map(gateway_name(pool), DEFAULT_GATEWAY_NAMESPACE)
    return str((found.data or {}).get("haproxy.cfg", ""))


def _twin_objects(api: client.ApiClient, namespace: str) -> list[str]:
    """The twin's objects that still exist, as "Kind name"."""
    apps, core = client.AppsV1Api(api), client.CoreV1Api(api)
    listings: dict[str, Callable[..., Any]] = {
        "ConfigMap": core.list_namespaced_config_map,
        "Deployment": apps.list_namespaced_deployment,
        "HPA": client.AutoscalingV2Api(api).list_namespaced_horizontal_pod_autoscaler,
        "NetworkPolicy": client.NetworkingV1Api(api).list_namespaced_network_policy,
        "PDB": client.PolicyV1Api(api).list_namespaced_pod_disruption_budget,
        "Service": core.list_namespaced_service,
    }
    selector = f"shoal.dev/model={TWIN}"
    return [
        f"{kind} {item.metadata.name}"
        for kind, listing in listings.items()
        for item in listing(namespace, label_selector=selector).items
    ]


def test_a_model_overflows_into_a_pool_that_admits_it_and_unset_removes_the_twin(
    api: client.ApiClient, operator: OperatorProcess, core: client.CoreV1Api, namespace: str
) -> None:
    shoal = Shoal(api)
    with shoal.pool([namespace], gpus=4) as own, shoal.pool(["elsewhere"], gpus=4) as spill:
        body = inference_model("ranker", own)
        body["spec"]["overflow"] = {"pool": spill, "maxReplicas": 2}
        shoal.create(body, namespace)
        refused = _refused(
            shoal, namespace, "NotAdmitted", "the overflow refused: its pool does not admit it"
        )
        assert refused["message"].startswith(f"spec.overflow.pool: TenantPool {spill}"), refused
        assert _twin_objects(api, namespace) == []
        # The model itself serves meanwhile. (The refusal is said in the model's first
        # pass, before its replica runs: Ready is awaited, not read at once.)
        wait_for(
            "the model Ready while its overflow is refused",
            lambda: shoal.get(IM, "ranker", namespace),
            lambda m: (
                condition(m, "Ready").get("status") == "True"
                and condition(m, "OverflowReady").get("reason") == "NotAdmitted"
            ),
            timeout=60,
        )

        shoal.patch("TenantPool", spill, {"spec": {"tenants": {"namespaces": [namespace]}}})
        ready, status = wait_for(
            "the overflow replica ready in the overflow pool",
            lambda: _overflow(shoal, namespace),
            lambda seen: seen[0].get("status") == "True",
            timeout=90,
        )
        assert status == {"pool": spill, "replicas": 1, "readyReplicas": 1}, status
        assert ready["message"] == f"1 overflow replicas ready in pool {spill}.", ready
        assert _twin_objects(api, namespace) == [
            f"ConfigMap {TWIN}-model-config",
            f"Deployment {TWIN}",
            f"HPA {TWIN}",
            f"NetworkPolicy {TWIN}",
            f"PDB {TWIN}",
            f"Service {TWIN}",
        ]
        (pod,) = core.list_namespaced_pod(namespace, label_selector=f"shoal.dev/model={TWIN}").items
        assert pod.spec.priority_class_name == pool_priority_class(spill)
        assert (pod.metadata.labels or {})["shoal.dev/pool"] == spill
        # The overflow pool's quota in the namespace counts the replica's GPU.
        quota = wait_for(
            "the overflow pool's quota to count the replica",
            lambda: core.read_namespaced_resource_quota(pool_priority_class(spill), namespace),
            lambda q: (q.status.used or {}).get("requests.nvidia.com/gpu") == "1",
            timeout=30,
        )
        assert (quota.spec.hard or {}).get("requests.nvidia.com/gpu") == "4"
        # The model's own pool's gateway routes the spill to the ready replica.
        backend = f"backend m_{namespace}_ranker_overflow"
        config = wait_for(
            "the own pool's gateway to list the overflow replica",
            lambda: _gateway_config(core, own),
            lambda text: backend in text and f" {pod.status.pod_ip}:8000 " in text,
            timeout=60,
        )
        assert f"{pod.metadata.name} {pod.status.pod_ip}:8000" in config
        assert backend not in _gateway_config(core, spill)

        shoal.patch(IM, "ranker", {"spec": {"overflow": None}}, namespace)
        wait_for(
            "the twin's objects removed",
            lambda: _twin_objects(api, namespace),
            lambda left: left == [],
            timeout=60,
        )
        wait_for(
            "the model's status to say no more of an overflow",
            lambda: _overflow(shoal, namespace),
            lambda seen: seen == ({}, {}),
            timeout=30,
        )
        wait_for(
            "the gateway to route no more to an overflow",
            lambda: _gateway_config(core, own),
            lambda text: "_overflow" not in text,
            timeout=60,
        )
        shoal.delete(IM, "ranker", namespace)


def test_a_model_named_like_an_overflow_stack_is_never_taken_for_one(
    api: client.ApiClient, operator: OperatorProcess, namespace: str
) -> None:
    """Model "ranker-overflow" has the names "ranker"'s overflow stack would take: the
    passes of "ranker" without spec.overflow leave its stack alone, and with it
    "ranker" says NameConflict and runs no overflow replicas."""
    shoal = Shoal(api)
    apps = client.AppsV1Api(api)
    with shoal.pool([namespace], gpus=4) as own, shoal.pool([namespace], gpus=4) as spill:
        shoal.create(inference_model(TWIN, own), namespace)
        shoal.create(inference_model("ranker", own), namespace)
        wait_for(
            "both models Ready",
            lambda: [
                condition(shoal.get(IM, name, namespace), "Ready").get("status")
                for name in ("ranker", TWIN)
            ],
            lambda seen: seen == ["True", "True"],
            timeout=90,
        )
        before = apps.read_namespaced_deployment(TWIN, namespace).metadata.uid
        wait_for_passes(operator.metrics_url, rounds=2, kinds=(IM,))
        assert apps.read_namespaced_deployment(TWIN, namespace).metadata.uid == before

        shoal.patch(IM, "ranker", {"spec": {"overflow": {"pool": spill}}}, namespace)
        _refused(
            shoal, namespace, "NameConflict", "ranker to refuse an overflow whose names are taken"
        )
        wait_for_passes(operator.metrics_url, rounds=2, kinds=(IM,))
        other = apps.read_namespaced_deployment(TWIN, namespace)
        assert other.metadata.uid == before
        assert (other.spec.template.metadata.labels or {})["shoal.dev/pool"] == own
        for name in ("ranker", TWIN):
            shoal.delete(IM, name, namespace)


def _isolation(api: client.ApiClient, namespace: str, pool: str) -> dict[str, Any]:
    """What of the pool is in the namespace: its NetworkPolicies' names, whether its
    quota is there, and how many of its pods (twin replicas, here) are left."""
    core, net = client.CoreV1Api(api), client.NetworkingV1Api(api)
    names = [str(p.metadata.name) for p in net.list_namespaced_network_policy(namespace).items]
    policies = sorted(name for name in names if name.startswith(f"shoal-{pool}-"))
    quotas = [q.metadata.name for q in core.list_namespaced_resource_quota(namespace).items]
    pods = core.list_namespaced_pod(namespace, label_selector=f"shoal.dev/pool={pool}").items
    return {
        "policies": policies,
        "quota": pool_priority_class(pool) in quotas,
        "pods": len(pods),
    }


def test_the_overflow_pool_withdrawing_the_namespace_takes_the_twin_never_its_isolation(
    api: client.ApiClient, operator: OperatorProcess, core: client.CoreV1Api, namespace: str
) -> None:
    """The overflow pool stops admitting the model's namespace while the twin runs: the
    twin goes (OverflowReady NotAdmitted) and the model serves on. The twin's pod is
    held terminating by a finalizer of the test's (as a slow shutdown would), and for
    as long as it is left, after the pool's passes have run, the overflow pool keeps
    its default-deny and its quota there and nothing else; once the pod is gone, those
    go too: a namespace's withdrawal never leaves a pool's pods without isolation, a
    twin's no more than a model's."""
    shoal = Shoal(api)
    hold = "test.shoal.dev/hold"
    with shoal.pool([namespace], gpus=4) as own, shoal.pool([namespace], gpus=4) as spill:
        body = inference_model("ranker", own)
        body["spec"]["overflow"] = {"pool": spill, "maxReplicas": 2}
        shoal.create(body, namespace)
        wait_for(
            "the overflow replica ready",
            lambda: _overflow(shoal, namespace),
            lambda seen: seen[0].get("status") == "True",
            timeout=90,
        )
        deny = f"shoal-{spill}-default-deny"
        before = _isolation(api, namespace, spill)
        assert before["pods"] == 1, before
        assert deny in before["policies"], before
        assert len(before["policies"]) > 1, before  # its allow policies too
        assert before["quota"], before
        (pod,) = core.list_namespaced_pod(namespace, label_selector=f"shoal.dev/model={TWIN}").items
        pod_name = str(pod.metadata.name)
        core.patch_namespaced_pod(pod_name, namespace, {"metadata": {"finalizers": [hold]}})
        try:
            shoal.patch("TenantPool", spill, {"spec": {"tenants": {"namespaces": ["elsewhere"]}}})
            _refused(shoal, namespace, "NotAdmitted", "the overflow refused: no longer admitted")
            wait_for(
                "the twin's objects removed",
                lambda: _twin_objects(api, namespace),
                lambda left: left == [],
                timeout=60,
            )
            wait_for_passes(operator.metrics_url, rounds=2, kinds=("TenantPool",))
            held = _isolation(api, namespace, spill)
            assert held == {"policies": [deny], "quota": True, "pods": 1}, held
        finally:
            core.patch_namespaced_pod(pod_name, namespace, {"metadata": {"finalizers": None}})
        wait_for(
            "the overflow pool's isolation gone with the twin's pod",
            lambda: _isolation(api, namespace, spill),
            lambda now: now == {"policies": [], "quota": False, "pods": 0},
            timeout=60,
        )
        model = shoal.get(IM, "ranker", namespace)
        assert condition(model, "Ready").get("status") == "True", model.get("status")
        assert f"shoal-{own}-default-deny" in _isolation(api, namespace, own)["policies"]
        shoal.delete(IM, "ranker", namespace)
