"""Reconciling a TenantPool: its PriorityClass; a quota and network policies in every
tenant namespace it admits; what stays in a namespace it no longer admits; the
finalizer that holds its deletion while models use it; and its status.

Isolation first: a namespace that stops being admitted keeps the pool's default-deny
policy for as long as the pool's pods still run there, so a model is never left
reachable on every port.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from pydantic import ValidationError

from shoal.api.common import parse_object
from shoal.api.conditions import Cond, condition
from shoal.api.constants import GATEWAY_LABEL, MODEL_LABEL, POOL_FINALIZER, POOL_LABEL
from shoal.api.kinds import POOL
from shoal.api.refusal_words import invalid_message
from shoal.api.tenantpool import TenantPool
from shoal.cache import key_of
from shoal.kube.client import ApiError, api_message
from shoal.reconcile.elastic import DRAIN_SECONDS, RECHECK_SECONDS, converge_capacity
from shoal.reconcile.gateway import (
    GatewayUnavailableError,
    converge_gateway,
    issuer_keys_condition,
    trusted_keys,
)
from shoal.reconcile.prune import Owner, keys, prune, stale
from shoal.reconcile.status import assemble, kstatus, write_status
from shoal.render.access import access_condition, access_problems
from shoal.render.pool_plan import PoolFacts, PoolPlan, live_namespaces, plan_pool
from shoal.render.tenancy import tenant_objects, withdrawn_namespace_objects, withdrawn_namespaces
from shoal.state import Operator


def pool_usage(models: list[dict[str, Any]]) -> dict[str, int]:
    """GPUs, models and replicas of the pool's InferenceModels, from their status (pure)."""
    gpus = replicas = 0
    for model in models:
        count = int((model.get("status") or {}).get("replicas") or 0)
        per_replica = int(((model.get("spec") or {}).get("runtime") or {}).get("gpus", 1))
        replicas += count
        gpus += count * per_replica
    return {"gpusUsed": gpus, "models": len(models), "replicas": replicas}


def namespace_facts(op: Operator) -> dict[str, dict[str, str]]:
    """The live namespaces the operator watches, with their labels."""
    live = live_namespaces(op.cache.all("Namespace"))
    return {name: labels for name, labels in live.items() if op.watches(name)}


def isolation_objects(op: Operator, pool: TenantPool, namespace: str) -> list[dict[str, Any]]:
    """The quota and network policies ``pool`` puts into a tenant namespace."""
    return tenant_objects(pool, namespace, op.settings.cluster_cidrs, op.settings.gateway_namespace)


def _withdrawn(op: Operator, pool: TenantPool, namespace: str, admitted: list[str]) -> bool:
    """Whether ``namespace``, which the pool no longer admits, still holds its pods."""
    pods = op.kube.list("v1", "Pod", namespace, labels=f"{POOL_LABEL}={pool.metadata.name}")
    return namespace in withdrawn_namespaces(pool, admitted, pods)


def overflowing_into(op: Operator, pool: str) -> list[dict[str, Any]]:
    """The InferenceModels whose spec.overflow names ``pool``: the pool holds their
    overflow replicas, so it waits for them before it goes, and they follow its changes."""
    return [
        m
        for m in op.cache.all("InferenceModel")
        if ((m.get("spec") or {}).get("overflow") or {}).get("pool") == pool
    ]


def _spec_changed(body: dict[str, Any] | None) -> bool:
    """Gone, going, or its spec changed since the operator last handled it: the models
    that depend on it need a pass too. A status write alone does not count, or every
    pool usage update would re-check all of the pool's models."""
    if body is None or body["metadata"].get("deletionTimestamp"):
        return True
    observed = (body.get("status") or {}).get("observedGeneration")
    return bool(observed != body["metadata"].get("generation"))


def _hold(op: Operator, body: dict[str, Any], models: list[dict[str, Any]]) -> dict[str, Any]:
    """Keep Shoal's finalizer on the pool exactly while models use it; returns the pool
    as it stands afterwards."""
    finalizers = list(body["metadata"].get("finalizers") or [])
    held = POOL_FINALIZER in finalizers
    if bool(models) == held:
        return body
    others = [f for f in finalizers if f != POOL_FINALIZER]
    written = op.kube.set_finalizers(body, [*others, POOL_FINALIZER] if models else others)
    op.cache.put("TenantPool", written)
    return op.cache.get("TenantPool", body["metadata"]["name"]) or body


def _report_blocked(op: Operator, body: dict[str, Any], models: list[dict[str, Any]]) -> None:
    users = sorted(f"{m['metadata']['namespace']}/{m['metadata']['name']}" for m in models)
    message = (
        f"Deletion waits until no InferenceModel uses the pool or overflows into it; "
        f"{len(users)} still "
        f"do: {', '.join(users[:10])}."
    )
    ready = Cond("Ready", "False", "DeletionBlocked", message)
    status = assemble(body, [ready, *kstatus(ready, stalled=False)], **pool_usage(models))
    if write_status(op.kube, op.cache, body, status):
        op.kube.event(body, "Warning", "DeletionBlocked", message)


def _converge(op: Operator, pool: TenantPool, plan: PoolPlan) -> None:
    """Apply the pool's planned objects; remove those of namespaces it no longer admits,
    but the default-deny while the pool's pods still run there."""
    name = pool.metadata.name
    _apply_priority_class(op, plan.priority_class)
    desired = []
    for namespace in plan.admitted:
        with op.isolation_lock(name, namespace):
            for obj in plan.isolation[namespace]:
                op.kube.apply(obj)
                desired.append(obj)
    # A namespace the pool released keeps the default-deny while the pool's pods still
    # run there: those are planned too, once the stale objects show such a namespace.
    owner = pool_owner(name)
    held = op.cache.in_pool(name, owner.kinds)
    wanted = keys([plan.priority_class, *desired])
    released = dict.fromkeys(o["metadata"].get("namespace") for o in stale(owner, held, wanted))
    for namespace in filter(None, released):
        if _withdrawn(op, pool, namespace, list(plan.admitted)):
            with op.isolation_lock(name, namespace):
                for obj in withdrawn_namespace_objects(pool, namespace):
                    op.kube.apply(obj)
                    wanted.add(key_of(obj["kind"], obj))
    prune(op.kube, owner, held, wanted)


def pool_owner(name: str) -> Owner:
    """A pool's own objects: its PriorityClass, and its quota and policies in each
    namespace, not its gateway's or its models' (which carry its label too)."""
    return Owner(POOL, {POOL_LABEL: name}, unmarked=(GATEWAY_LABEL, MODEL_LABEL))


def _apply_priority_class(op: Operator, obj: dict[str, Any]) -> None:
    """A PriorityClass's value and preemption policy cannot change in an update: when
    the pool's do, the class is deleted and created anew (pods already running keep the
    priority they were admitted with until their Deployment rolls them; it does, since
    the priority is part of their template's checksum)."""
    try:
        op.kube.apply(obj)
    except ApiError as exc:
        message = api_message(exc)
        if exc.status != 422 or not ("immutable" in message or "may not be changed" in message):
            raise
        op.kube.delete(obj)
        op.kube.apply(obj)


def reconcile_pool(op: Operator, name: str) -> None:
    """One level-triggered pass over a TenantPool. Safe to call at any time."""
    body = op.cache.get("TenantPool", name)
    models = op.cache.in_pool(name, ["InferenceModel"])
    # Models that overflow into the pool: their overflow replicas run here.
    spilling = overflowing_into(op, name)
    if _spec_changed(body):  # its models re-place, re-check quotas, or report it gone
        for model in [*models, *spilling]:
            meta = model["metadata"]
            op.request_model(meta["namespace"], meta["name"])
        # A pool joining or leaving a cohort changes what its other members may borrow.
        for other in _elastic_pools(op):
            if other != name:
                op.request_pool(other)
    if body is None:
        op.pool_gauges.forget(name)
        op.set_wakeup("TenantPool", name, None)
        return
    if body["metadata"].get("deletionTimestamp"):
        op.pool_gauges.forget(name)
        op.set_wakeup("TenantPool", name, None)
        if models or spilling:
            _report_blocked(op, body, [*models, *spilling])
        else:
            _hold(op, body, models)
        return
    body = _hold(op, body, [*models, *spilling])
    try:
        pool = parse_object(TenantPool, body)
    except ValidationError as exc:  # only an object stored under an older schema
        op.set_wakeup("TenantPool", name, None)
        ready = Cond(
            "Ready", "False", "InvalidSpec", invalid_message("The spec", exc, one_line=True)
        )
        write_status(
            op.kube, op.cache, body, assemble(body, [ready, *kstatus(ready, stalled=True)])
        )
        return
    pools = parsed_pools(op.cache.all("TenantPool"))
    live = [p for p, deleting in pools if not deleting]
    facts = PoolFacts(
        now=dt.datetime.now(dt.UTC),
        namespaces=namespace_facts(op),
        cluster_cidrs=op.settings.cluster_cidrs,
        gateway_namespace=op.settings.gateway_namespace,
        kueue_served=op.kueue.served(op.kube),
        pools=live,
    )
    plan = plan_pool(pool, facts)
    admitted = list(plan.admitted)
    op.set_wakeup("TenantPool", name, plan.next_change)
    gateway: dict[str, Any] | None = None
    gateway_problem: GatewayUnavailableError | None = None
    capacity: dict[str, Any] | None = None
    evicted = 0
    elastic = Cond("ElasticCapacity", "Unknown", "NotApplied", "Not applied yet.")
    trusted = trusted_keys(op, pool)
    try:
        _converge(op, pool, plan)
        found = converge_capacity(
            op.kube,
            pool,
            live,
            admitted,
            facts.now,
            served=facts.kueue_served,
            desired=plan.capacity,
        )
        capacity, elastic, evicted = found.status, found.condition, found.evicted
        try:
            gateway = converge_gateway(op, pool, admitted, models, trusted)
        except GatewayUnavailableError as exc:
            gateway_problem = exc
        ready = Cond(
            "Ready",
            "True",
            "Accepted",
            f"Admits {len(admitted)} namespace(s); quotas and network policies are applied.",
        )
        stuck = False
    except ApiError as exc:
        if exc.status not in (400, 403, 404, 422):
            raise  # transient: retried with backoff
        ready = Cond(
            "Ready", "False", "ApplyFailed", f"{exc.status} {exc.reason}: {api_message(exc)}"
        )
        stuck = True
    problems = access_problems(pool, op.cache.all("Namespace"), [p for p, _ in pools])
    access = Cond(**access_condition(problems))
    gateway_ready = gateway_condition(pool, gateway, gateway_problem)
    issuers = issuer_keys_condition(pool, trusted)
    status = assemble(
        body,
        [ready, *kstatus(ready, stalled=stuck), access, *gateway_ready, *issuers, elastic],
        admittedNamespaces=admitted,
        gateway=gateway,
        capacity=capacity,
        **pool_usage(models),
    )
    _follow_capacity(op, pool, body, capacity, [*models, *spilling], draining=evicted > 0)
    op.pool_gauges.publish(name, str(pool.spec.isolation), capacity)
    before = condition(body.get("status"), access.type) or {}
    news = access.status == "False" and before.get("message") != access.message
    warnings = [access] if news else []
    for issue in issuers:
        was = condition(body.get("status"), issue.type) or {}
        if issue.status == "False" and was.get("message") != issue.message:
            warnings.append(issue)
    if write_status(op.kube, op.cache, body, status):
        for warning in warnings:
            op.kube.event(body, "Warning", warning.reason, warning.message)


def gateway_condition(
    pool: TenantPool, gateway: dict[str, Any] | None, problem: GatewayUnavailableError | None
) -> list[Cond]:
    """GatewayReady: whether the pool's gateway has a replica ready to take requests."""
    if not pool.spec.gateway.enabled:
        return [Cond("GatewayReady", "False", "Disabled", "The pool has no gateway.")]
    if problem is not None:
        return [Cond("GatewayReady", "False", problem.reason, problem.message)]
    if gateway is None:
        return [Cond("GatewayReady", "Unknown", "NotApplied", "The gateway is not applied.")]
    ready, wanted = gateway["readyReplicas"], pool.spec.gateway.replicas
    if ready:
        return [Cond("GatewayReady", "True", "Available", f"{ready} of {wanted} replicas ready.")]
    return [Cond("GatewayReady", "False", "NoReplicasAvailable", "No gateway replica is ready.")]


def parsed_pools(bodies: list[dict[str, Any]]) -> list[tuple[TenantPool, bool]]:
    """Every pool that parses, with whether it is being deleted (pure); one that does not
    parse is reported on that pool's own pass. Parsed once per pass: the access check
    needs them all, the cohort only the pools that stay."""
    out = []
    for body in bodies:
        try:
            parsed = parse_object(TenantPool, body)
        except ValidationError:
            continue
        out.append((parsed, bool(body["metadata"].get("deletionTimestamp"))))
    return out


def _elastic_pools(op: Operator) -> list[str]:
    """Names of the pools that set elastic capacity."""
    return [
        b["metadata"]["name"]
        for b in op.cache.all("TenantPool")
        if ((b.get("spec") or {}).get("capacity")) is not None
    ]


def _follow_capacity(
    op: Operator,
    pool: TenantPool,
    body: dict[str, Any],
    capacity: dict[str, Any] | None,
    models: list[dict[str, Any]],
    *,
    draining: bool = False,
) -> None:
    """When the pool's mode changes (Kueue installed or gone, capacity set or unset),
    its models' pods name the queue or stop naming it: they need a pass. A pool with
    elastic capacity looks again later: Kueue's ClusterQueues, whose figures its status
    quotes, are not watched, and Kueue may be installed meanwhile; sooner while it
    drains replicas above a lowered quota (``draining``: it evicted some this pass)."""
    before = ((body.get("status") or {}).get("capacity") or {}).get("mode")
    mode = (capacity or {}).get("mode")
    if mode is not None and before is not None and mode != before:
        for model in models:
            meta = model["metadata"]
            op.request_model(meta["namespace"], meta["name"])
    if pool.spec.capacity is not None:
        op.request_pool(pool.metadata.name, DRAIN_SECONDS if draining else RECHECK_SECONDS)
