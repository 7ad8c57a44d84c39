"""A model never runs without its isolation, through a pool's changes, on the real
cluster with the real operator: a newly admitted namespace holds the pool's policies
before the model's Deployment exists, and a namespace the pool withdraws from keeps its
default-deny (and quota) for as long as the pool's pods run there.

(tests/e2e/test_network_isolation.py checks with network-config-analyzer what these
policies allow; this checks which of them exist when.)
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from e2e.operator import OperatorProcess
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests.support.passes import wait_for_passes
from tests.support.shoal_objects import Shoal, inference_model, wait_ready, wait_reason
from tests.support.wait import wait_for


def _policies(net: client.NetworkingV1Api, namespace: str, pool: str) -> dict[str, dt.datetime]:
    """The pool's NetworkPolicies in ``namespace``: name -> creation time."""
    policies: dict[str, dt.datetime] = {}
    for p in net.list_namespaced_network_policy(
        namespace, label_selector=f"shoal.dev/pool={pool}"
    ).items:
        # The API server sets both on every object it stores.
        assert p.metadata.name is not None
        assert p.metadata.creation_timestamp is not None
        policies[p.metadata.name] = p.metadata.creation_timestamp
    return policies


def _create_once_admitted(shoal: Shoal, body: dict[str, Any], namespace: str) -> bool:
    try:
        shoal.create(body, namespace)
    except ApiException as exc:
        if exc.status == 403 and "does not admit namespace" in (exc.body or ""):
            return False
        raise
    return True


def test_a_newly_admitted_namespace_is_isolated_before_its_model_runs(
    api: client.ApiClient, operator: OperatorProcess, namespace: str
) -> None:
    """The model is created in the same moment its namespace is admitted: whichever
    pass comes first, the default-deny policy is older than the Deployment."""
    shoal = Shoal(api)
    net, apps = client.NetworkingV1Api(api), client.AppsV1Api(api)
    with shoal.pool(["somewhere-else"]) as pool:
        shoal.patch("TenantPool", pool, {"spec": {"tenants": {"namespaces": [namespace]}}})
        # The admission policy reads the pool from the API server's own informer, which
        # may lag the patch by a moment: the create is retried on that refusal alone,
        # as a GitOps controller would.
        wait_for(
            "the admission policy to see the namespace admitted",
            lambda: _create_once_admitted(shoal, inference_model("early", pool), namespace),
            lambda created: created,
            timeout=30,
        )
        wait_ready(shoal, namespace, "early")
        deployment = apps.read_namespaced_deployment("early", namespace)
        policies = _policies(net, namespace, pool)
        deny = policies[f"shoal-{pool}-default-deny"]
        assert deployment.metadata.creation_timestamp is not None
        assert deny <= deployment.metadata.creation_timestamp, (deny, deployment.metadata)


def test_a_withdrawn_namespace_keeps_its_default_deny_while_the_pools_pods_run(
    api: client.ApiClient, operator: OperatorProcess, namespace: str, core: client.CoreV1Api
) -> None:
    shoal = Shoal(api)
    net = client.NetworkingV1Api(api)
    with shoal.pool([namespace]) as pool:
        shoal.create(inference_model("left", pool), namespace)
        wait_ready(shoal, namespace, "left")
        admitted = _policies(net, namespace, pool)
        assert len(admitted) > 1, admitted

        shoal.patch("TenantPool", pool, {"spec": {"tenants": {"namespaces": ["elsewhere"]}}})
        wait_reason(shoal, namespace, "left", "NamespaceNotAdmitted")
        wait_for_passes(operator.metrics_url, rounds=2)
        # The pods still run: nothing reaches them and they reach nothing.
        pods = core.list_namespaced_pod(namespace, label_selector="shoal.dev/model=left").items
        assert pods, "the model's pods should still be there"
        assert set(_policies(net, namespace, pool)) == {f"shoal-{pool}-default-deny"}
        quotas = [q.metadata.name for q in core.list_namespaced_resource_quota(namespace).items]
        assert f"shoal-pool-{pool}" in quotas

        # Once the pool's last pod there is gone, so is what the pool kept.
        shoal.delete("InferenceModel", "left", namespace)
        wait_for(
            "the pool's objects to leave the namespace",
            lambda: (
                _policies(net, namespace, pool),
                [q.metadata.name for q in core.list_namespaced_resource_quota(namespace).items],
            ),
            lambda seen: not seen[0] and f"shoal-pool-{pool}" not in seen[1],
            timeout=60,
        )
