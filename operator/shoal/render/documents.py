"""``shoal render``: custom resources in, every object the operator would create out.

Works on documents alone, with no cluster: the pools and batch policies a model refers
to must be among the documents, and a pool's selector is matched against the Namespace
documents given.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import ValidationError

from shoal.api.admission import admits
from shoal.api.batchpolicy import BatchPolicy
from shoal.api.inferencemodel import InferenceModel
from shoal.api.tenantpool import TenantPool
from shoal.render.desired import model_objects, pool_objects
from shoal.render.tenancy import DEFAULT_CLUSTER_CIDRS, tenant_objects


class RenderError(ValueError):
    """A document cannot be rendered; the message says which and why."""


def _where(doc: dict[str, Any]) -> str:
    meta = doc.get("metadata") or {}
    ns = f"{meta['namespace']}/" if meta.get("namespace") else ""
    return f"{doc.get('kind')} {ns}{meta.get('name', '?')}"


def render_documents(
    docs: list[dict[str, Any]], cluster_cidrs: Sequence[str] = DEFAULT_CLUSTER_CIDRS
) -> list[dict[str, Any]]:
    pools: dict[str, TenantPool] = {}
    policies: dict[tuple[str, str], BatchPolicy] = {}
    models: list[InferenceModel] = []
    namespaces: dict[str, dict[str, str]] = {}
    for doc in docs:
        if doc.get("kind") == "Namespace" and doc.get("apiVersion") == "v1":
            name = (doc.get("metadata") or {}).get("name", "")
            labels = dict((doc.get("metadata") or {}).get("labels") or {})
            namespaces[name] = {"kubernetes.io/metadata.name": name, **labels}
            continue
        if not str(doc.get("apiVersion", "")).startswith("shoal.dev/"):
            continue
        doc = dict(doc)
        if doc.get("kind") in ("InferenceModel", "BatchPolicy"):
            doc["metadata"] = {"namespace": "default", **(doc.get("metadata") or {})}
        try:
            if doc.get("kind") == "TenantPool":
                pool = TenantPool.model_validate(doc)
                pools[pool.metadata.name] = pool
            elif doc.get("kind") == "BatchPolicy":
                policy = BatchPolicy.model_validate(doc)
                policies[(policy.metadata.namespace or "", policy.metadata.name)] = policy
            elif doc.get("kind") == "InferenceModel":
                models.append(InferenceModel.model_validate(doc))
            else:
                raise RenderError(f"{_where(doc)}: unknown kind")
        except ValidationError as exc:
            raise RenderError(f"{_where(doc)} is invalid:\n{exc}") from None

    out: list[dict[str, Any]] = []
    for each_pool in pools.values():
        out += pool_objects(each_pool)
        # Tenant namespaces: those the pool names, and the given Namespace documents
        # its selector admits (a cluster may hold more; the operator finds those).
        admitted = set(each_pool.spec.tenants.namespaces) | {
            name for name, labels in namespaces.items() if admits(each_pool, name, labels)
        }
        for namespace in sorted(admitted):
            out += tenant_objects(each_pool, namespace, cluster_cidrs)
    for model in models:
        where = f"InferenceModel {model.metadata.namespace}/{model.metadata.name}"
        model_pool = pools.get(model.spec.pool)
        if model_pool is None:
            raise RenderError(f"{where}: TenantPool {model.spec.pool!r} is not among the files")
        policy_spec = None
        if model.spec.batch_policy:
            key = (model.metadata.namespace or "", model.spec.batch_policy.name)
            found = policies.get(key)
            if found is None:
                raise RenderError(f"{where}: BatchPolicy {key[0]}/{key[1]} is not among the files")
            policy_spec = found.spec
        try:
            out += model_objects(model, policy_spec, model_pool)
        except ValueError as exc:
            raise RenderError(f"{where}: {exc}") from None
    return out
