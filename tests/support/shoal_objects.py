"""Building and reading shoal.dev objects in cluster tests."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, cast

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests.support.wait import wait_for

GROUP, VERSION = "shoal.dev", "v1alpha1"


def shared_pool(
    name: str, namespaces: list[str], gpus: int = 8, gateway: bool = True
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "isolation": "Shared",
        "tenants": {"namespaces": namespaces},
        "placement": {"nodeSelector": {"shoal.dev/node-group": "shared-gpu"}},
        "quota": {"gpus": gpus},
    }
    if not gateway:
        spec["gateway"] = {"enabled": False}
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "TenantPool",
        "metadata": {"name": name},
        "spec": spec,
    }


def batch_policy(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "BatchPolicy",
        "metadata": {"name": name},
        "spec": {"maxBatchSize": 8, "maxQueueDelay": "2ms", **spec},
    }


def inference_model(
    name: str, pool: str, policy: str | None = None, min_replicas: int = 1, gpus: int = 1
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "pool": pool,
        # Its Triton name is its own: two models of a pool in one namespace may not share
        # one (the gateway would route both names' URL to one of them).
        "model": {"name": name, "backend": "python", "storageUri": "s3://models/linear"},
        "runtime": {"gpus": gpus},
        "scaling": {"minReplicas": min_replicas, "maxReplicas": max(min_replicas, 3)},
    }
    if policy:
        spec["batchPolicy"] = {"name": policy}
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "InferenceModel",
        "metadata": {"name": name},
        "spec": spec,
    }


class Shoal:
    """Create, read and delete shoal.dev objects through the real API server."""

    def __init__(self, api: client.ApiClient) -> None:
        self.custom = client.CustomObjectsApi(api)

    def create(self, obj: dict[str, Any], namespace: str | None = None) -> dict[str, Any]:
        plural = _plural(obj["kind"])
        if obj["kind"] == "TenantPool":
            return _body(self.custom.create_cluster_custom_object(GROUP, VERSION, plural, obj))
        assert namespace is not None, f"a {obj['kind']} is namespaced: pass its namespace"
        return _body(
            self.custom.create_namespaced_custom_object(GROUP, VERSION, namespace, plural, obj)
        )

    def get(self, kind: str, name: str, namespace: str | None = None) -> dict[str, Any]:
        if kind == "TenantPool":
            return _body(self.custom.get_cluster_custom_object(GROUP, VERSION, _plural(kind), name))
        assert namespace is not None, f"a {kind} is namespaced: pass its namespace"
        return _body(
            self.custom.get_namespaced_custom_object(GROUP, VERSION, namespace, _plural(kind), name)
        )

    def patch(
        self, kind: str, name: str, body: dict[str, Any], namespace: str | None = None
    ) -> None:
        if kind == "TenantPool":
            self.custom.patch_cluster_custom_object(GROUP, VERSION, _plural(kind), name, body)
        else:
            assert namespace is not None, f"a {kind} is namespaced: pass its namespace"
            self.custom.patch_namespaced_custom_object(
                GROUP, VERSION, namespace, _plural(kind), name, body
            )

    def apply(self, obj: dict[str, Any], field_manager: str) -> None:
        """Server-side apply ``obj`` (namespaced ones name their namespace) as
        ``field_manager``, without forcing conflicts, as ``kubectl apply --server-side``
        does."""
        meta, plural = obj["metadata"], _plural(obj["kind"])
        how: dict[str, Any] = {
            "field_manager": field_manager,
            "_content_type": "application/apply-patch+yaml",
        }
        if obj["kind"] == "TenantPool":
            self.custom.patch_cluster_custom_object(
                GROUP, VERSION, plural, meta["name"], obj, **how
            )
        else:
            self.custom.patch_namespaced_custom_object(
                GROUP, VERSION, meta["namespace"], plural, meta["name"], obj, **how
            )

    def delete(self, kind: str, name: str, namespace: str | None = None) -> None:
        try:
            if kind == "TenantPool":
                self.custom.delete_cluster_custom_object(GROUP, VERSION, _plural(kind), name)
            else:
                assert namespace is not None, f"a {kind} is namespaced: pass its namespace"
                self.custom.delete_namespaced_custom_object(
                    GROUP, VERSION, namespace, _plural(kind), name
                )
        except ApiException as exc:
            if exc.status != 404:
                raise

    @contextmanager
    def pool(self, namespaces: list[str], **kwargs: Any) -> Iterator[str]:
        """A shared TenantPool with a unique name, deleted afterwards."""
        name = f"pool-{uuid.uuid4().hex[:8]}"
        self.create(shared_pool(name, namespaces, **kwargs))
        try:
            yield name
        finally:
            self.delete("TenantPool", name)


def _body(result: object) -> dict[str, Any]:
    """A copy of what a CustomObjectsApi call returned. The client types its results
    ``object``; for these calls the server's answer is the object, a JSON mapping."""
    return dict(cast("dict[str, Any]", result))


def _plural(kind: str) -> str:
    return {
        "InferenceModel": "inferencemodels",
        "TenantPool": "tenantpools",
        "BatchPolicy": "batchpolicies",
    }[kind]


def condition(obj: dict[str, Any], type_: str) -> dict[str, Any]:
    for cond in (obj.get("status") or {}).get("conditions") or []:
        if cond["type"] == type_:
            return dict(cond)
    return {}


def ready(obj: dict[str, Any]) -> bool:
    status = obj.get("status") or {}
    return (
        condition(obj, "Ready").get("status") == "True"
        and status.get("observedGeneration") == obj["metadata"]["generation"]
    )


def autoscaler_evaluated(obj: dict[str, Any]) -> bool:
    """The HPA's first evaluation has reached the model's AutoscalerReady (a status
    change of its own, which must not land in a test's no-op window)."""
    return condition(obj, "AutoscalerReady").get("status") in ("True", "False")


def wait_ready(shoal: Shoal, namespace: str, name: str, timeout: float = 90) -> dict[str, Any]:
    """The InferenceModel once Ready for its current generation, its HPA evaluated."""
    return wait_for(
        f"InferenceModel {namespace}/{name} Ready",
        lambda: shoal.get("InferenceModel", name, namespace),
        lambda m: ready(m) and autoscaler_evaluated(m),
        timeout=timeout,
    )


def wait_reason(
    shoal: Shoal, namespace: str, name: str, reason: str, timeout: float = 60
) -> dict[str, Any]:
    """The InferenceModel once its Ready condition gives ``reason``."""
    return wait_for(
        f"InferenceModel {namespace}/{name} Ready=False {reason}",
        lambda: shoal.get("InferenceModel", name, namespace),
        lambda m: condition(m, "Ready").get("reason") == reason,
        timeout=timeout,
    )
