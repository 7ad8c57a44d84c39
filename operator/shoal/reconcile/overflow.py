"""A model's overflow replicas, part of the model's pass: their stack applied in the
overflow pool when it may run there (the pool exists, admits the namespace and its
quota fits them, and the model's own pool has the gateway that spills to them),
removed when it may not or is no longer asked for, and what the model's status says.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from shoal.api.admission import refusals
from shoal.api.batchpolicy import BatchPolicySpec
from shoal.api.common import parse_object
from shoal.api.conditions import Cond
from shoal.api.constants import MODEL_LABEL, OVERFLOW_OF_LABEL
from shoal.api.inferencemodel import InferenceModel, Overflow
from shoal.api.kinds import MODEL
from shoal.api.refusal_words import invalid_message
from shoal.api.tenantpool import TenantPool
from shoal.kube.client import TERMINAL_API_STATUSES, ApiError, api_message
from shoal.reconcile.pool import isolation_objects
from shoal.reconcile.prune import Owner, apply_and_prune, prune
from shoal.render.elastic import model_queue
from shoal.render.overflow import overflow_name, overflow_objects, overflow_twin
from shoal.state import Operator

OVERFLOW_READY = "OverflowReady"
# The twin's refusals speak of its own fields; the user set them under spec.overflow.
_FIELDS = (
    ("spec.pool", "spec.overflow.pool"),
    ("spec.scaling.minReplicas", "spec.overflow.minReplicas"),
    ("spec.scaling.maxReplicas", "spec.overflow.maxReplicas"),
)


@dataclass(frozen=True)
class OverflowState:
    """What the model's status says about its overflow replicas."""

    condition: Cond
    status: dict[str, Any] | None = None


def _refused(reason: str, message: str) -> OverflowState:
    return OverflowState(Cond(OVERFLOW_READY, "False", reason, message))


def _overflow_pool(
    op: Operator, model: InferenceModel, overflow: Overflow, own_pool: TenantPool
) -> TenantPool | OverflowState:
    """The overflow pool, or why the overflow replicas cannot run there."""
    if not own_pool.spec.gateway.enabled:
        return _refused(
            "GatewayDisabled",
            f"Overflow replicas take the requests pool {own_pool.metadata.name}'s gateway "
            "spills to them, and that gateway is disabled.",
        )
    namespace = model.metadata.namespace or ""
    name = overflow_name(model.metadata.name)
    if op.cache.has("InferenceModel", name, namespace):
        return _refused(
            "NameConflict",
            f"InferenceModel {namespace}/{name} exists: its objects have the names the "
            "overflow replicas would take.",
        )
    body = op.cache.get("TenantPool", overflow.pool)
    if body is None:
        return _refused("TenantPoolNotFound", f"TenantPool {overflow.pool!r} does not exist.")
    if body["metadata"].get("deletionTimestamp"):
        return _refused(
            "TenantPoolDeleting",
            f"TenantPool {overflow.pool!r} is being deleted; it waits until no model names it.",
        )
    try:
        pool = parse_object(TenantPool, body)
    except ValidationError as exc:
        return _refused(
            "InvalidTenantPool",
            invalid_message(f"TenantPool {overflow.pool!r}", exc, one_line=True),
        )
    ns = op.cache.get("Namespace", namespace) or {}
    labels = dict((ns.get("metadata") or {}).get("labels") or {})
    found = refusals(pool, overflow_twin(model, overflow), labels)
    if found:
        message = "; ".join(found)
        for twin_field, own_field in _FIELDS:
            message = message.replace(twin_field, own_field)
        return _refused("NotAdmitted", message)
    limit = pool.spec.quota.models
    if limit is not None:
        rank = overflow_rank(model, pool.metadata.name, op.cache.all("InferenceModel", [namespace]))
        if rank >= limit:
            return _refused(
                "NotAdmitted",
                f"spec.overflow.pool: TenantPool {pool.metadata.name} allows {limit} model(s) "
                "per namespace, its own models first; the overflow replicas would be "
                f"number {rank + 1} here.",
            )
    return pool


def overflow_rank(model: InferenceModel, pool: str, siblings: list[dict[str, Any]]) -> int:
    """Where the model's overflow stack counts among ``pool``'s models in the namespace
    (pure): after the pool's own models, then by creation among the models that
    overflow into it. A pool's quota.models counts both."""
    own = sum(1 for m in siblings if (m.get("spec") or {}).get("pool") == pool)
    spilling = sorted(
        (m["metadata"].get("creationTimestamp") or "", m["metadata"]["name"])
        for m in siblings
        if ((m.get("spec") or {}).get("overflow") or {}).get("pool") == pool
    )
    names = [name for _, name in spilling]
    here = names.index(model.metadata.name) if model.metadata.name in names else len(names)
    return own + here


def twin_owner(model: InferenceModel) -> Owner:
    """The model's overflow stack: objects labelled as its twin's and as its overflow,
    never another model's stack that happens to have the twin's name."""
    twin = overflow_name(model.metadata.name)
    return Owner(MODEL, {MODEL_LABEL: twin, OVERFLOW_OF_LABEL: model.metadata.name})


def _held(op: Operator, model: InferenceModel, owner: Owner) -> list[dict[str, Any]]:
    twin = overflow_name(model.metadata.name)
    return op.cache.of_model(model.metadata.namespace or "", twin, owner.kinds)


def remove_overflow(op: Operator, model: InferenceModel) -> None:
    """Delete whatever the model's overflow stack left (the cache says what exists)."""
    owner = twin_owner(model)
    prune(op.kube, owner, _held(op, model, owner), ())


def converge_overflow(
    op: Operator, model: InferenceModel, batching: BatchPolicySpec, own_pool: TenantPool
) -> OverflowState | None:
    """Apply or remove the model's overflow stack; None when it asks for none."""
    overflow = model.spec.overflow
    if overflow is None:
        remove_overflow(op, model)
        return None
    found = _overflow_pool(op, model, overflow, own_pool)
    if isinstance(found, OverflowState):
        remove_overflow(op, model)
        return found
    pool = found
    namespace = model.metadata.namespace or ""
    queue = model_queue(pool, lambda: op.kueue.served(op.kube))
    desired = overflow_objects(
        model, batching, pool, op.settings.gateway.namespace, op.settings.serving_images, queue
    )
    deployment: dict[str, Any] = {}
    try:
        # The overflow pool's isolation holds in the namespace before its pods exist.
        with op.isolation_lock(pool.metadata.name, namespace):
            for obj in isolation_objects(op, pool, namespace):
                op.kube.apply(obj)
        owner = twin_owner(model)
        held = _held(op, model, owner)
        for obj, live in zip(desired, apply_and_prune(op.kube, owner, desired, held), strict=True):
            if obj["kind"] == "Deployment":
                deployment = live
    except ApiError as exc:
        if exc.status in TERMINAL_API_STATUSES:
            return _refused(
                "ApplyFailed",
                f"Applying the overflow replicas failed: {exc.status} {exc.reason}: "
                f"{api_message(exc)}",
            )
        raise  # transient: the pass is retried with backoff
    rollout = deployment.get("status") or {}
    ready, replicas = rollout.get("readyReplicas", 0), rollout.get("replicas", 0)
    status = {"pool": pool.metadata.name, "replicas": replicas, "readyReplicas": ready}
    if ready:
        cond = Cond(
            OVERFLOW_READY,
            "True",
            "Available",
            f"{ready} overflow replicas ready in pool {pool.metadata.name}.",
        )
    else:
        cond = Cond(
            OVERFLOW_READY,
            "False",
            "NoReplicasAvailable",
            f"No overflow replica is ready yet in pool {pool.metadata.name}.",
        )
    return OverflowState(cond, status)
