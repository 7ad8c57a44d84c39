"""Reconciling one InferenceModel into its Triton serving stack.

One pass: read the model, its pool, its BatchPolicy and its namespace (from the cache),
decide whether the model can be served, make sure its namespace holds the pool's
isolation, apply the stack, read how the rollout goes, and write the status. A problem
with the spec or its surroundings never raises: it becomes the status.
"""

from __future__ import annotations

import datetime as dt
import logging
from dataclasses import dataclass, replace
from typing import Any

from pydantic import ValidationError

from shoal.api.admission import admits, refusals
from shoal.api.batchpolicy import BatchPolicy
from shoal.api.common import parse_duration, parse_object
from shoal.api.conditions import Cond, condition
from shoal.api.constants import API_VERSION, MODEL_LABEL, OVERFLOW_OF_LABEL
from shoal.api.inferencemodel import InferenceModel
from shoal.api.kinds import MODEL
from shoal.api.refusal_words import invalid_message
from shoal.api.tenantpool import TenantPool
from shoal.kube.client import TERMINAL_API_STATUSES, ApiError, api_message
from shoal.metrics.status import metrics_status
from shoal.reconcile.autoscaler_state import AUTOSCALER_READY, autoscaler_condition
from shoal.reconcile.overflow import OVERFLOW_READY, OverflowState, converge_overflow
from shoal.reconcile.pool import isolation_objects
from shoal.reconcile.prune import Owner, keys, prune
from shoal.reconcile.replica_state import (
    FETCHING,
    LOADING,
    PENDING,
    READY,
    ModelLoadState,
    summarise,
)
from shoal.reconcile.status import assemble, kstatus, write_status
from shoal.render.autoscaler import ReplicaBounds
from shoal.render.elastic import nominal_at
from shoal.render.gateway import gateway_host
from shoal.render.model_plan import ModelFacts, PlanError, PoolMember, plan_model
from shoal.render.names import GRPC_PORT, HTTP_PORT
from shoal.render.schedule import Floor
from shoal.state import POOL_GATHER_SECONDS, Operator

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Outcome:
    """What a pass found: the conditions to report and the Deployment it saw."""

    ready: Cond
    progressing: Cond
    degraded: Cond
    # Nothing but a change to the spec or its surroundings can help.
    stalled: bool = False
    deployment: dict[str, Any] | None = None
    floor: Floor | None = None
    # The replicas the HPA keeps it between (floor clamped by the ceiling): the warm
    # pool status reports is the HPA's minReplicas.
    bounds: ReplicaBounds | None = None
    # When a scheduled window (or the pool's capacity window) opens or closes.
    next_change: dt.datetime | None = None
    # Replicas per state (shoal.reconcile.replica_state), while not all serve.
    replica_states: dict[str, int] | None = None
    # The model's effective maxBatchSize, for its batch fill.
    max_batch_size: int | None = None
    # AutoscalerReady, from the HPA's ScalingActive (shoal.reconcile.autoscaler_state).
    autoscaler: Cond | None = None
    # OverflowReady and status.overflow, where the model names an overflow pool.
    overflow: OverflowState | None = None


# Ready=False reasons of a model whose replicas are still on their way: no warning.
ON_THE_WAY = frozenset({"NoReplicasAvailable", PENDING, FETCHING, LOADING})
# Ready=False while the pool's capacity window leaves the model no GPUs: planned, so
# the Event that says so is Normal.
SCALED_TO_ZERO = "ScaledToZero"


def _blocked(reason: str, message: str, *, stalled: bool) -> Outcome:
    """The model cannot be served: nothing is applied, the reason is reported."""
    return Outcome(
        ready=Cond("Ready", "False", reason, message),
        progressing=Cond("Progressing", "False", reason, message),
        degraded=Cond("Degraded", "True", reason, message),
        stalled=stalled,
    )


def stalled(reason: str, message: str) -> Outcome:
    return _blocked(reason, message, stalled=True)


def waiting(reason: str, message: str) -> Outcome:
    return _blocked(reason, message, stalled=False)


def rollout_outcome(deployment: dict[str, Any], replicas_wanted: int) -> Outcome:
    """Conditions from the Deployment's own status (pure)."""
    status = deployment.get("status") or {}
    generation = (deployment.get("metadata") or {}).get("generation")
    observed = status.get("observedGeneration")
    replicas = status.get("replicas", 0)
    updated = status.get("updatedReplicas", 0)
    available = status.get("availableReplicas", 0)
    conds = {c["type"]: c for c in status.get("conditions", []) or []}
    failure = conds.get("ReplicaFailure")
    progress = conds.get("Progressing")

    if failure and failure.get("status") == "True":
        degraded = Cond("Degraded", "True", "ReplicaFailure", failure.get("message") or "")
    elif progress and progress.get("reason") == "ProgressDeadlineExceeded":
        degraded = Cond(
            "Degraded", "True", "ProgressDeadlineExceeded", progress.get("message") or ""
        )
    else:
        degraded = Cond("Degraded", "False", "AsExpected", "All objects are applied.")

    rolling = observed != generation or updated < replicas or replicas > available
    if rolling:
        progressing = Cond(
            "Progressing",
            "True",
            "RollingOut",
            f"{updated} of {replicas} replicas updated, {available} available.",
        )
    else:
        progressing = Cond(
            "Progressing", "False", "RolloutComplete", f"{available} replicas available."
        )

    if available > 0:
        ready = Cond(
            "Ready",
            "True",
            "Available",
            f"{available} of {replicas_wanted} replicas ready to serve.",
        )
    else:
        ready = Cond("Ready", "False", "NoReplicasAvailable", "No Triton replica is ready yet.")
    return Outcome(ready, progressing, degraded, deployment=deployment)


def admission_refusal(
    model: InferenceModel,
    pool: TenantPool,
    namespace_labels: dict[str, str],
    siblings: list[dict[str, Any]],
) -> tuple[str, str] | None:
    """Why the pool refuses the model, if it does (pure): the admission policy's rules
    (shoal.api.admission.refusals, for models admitted before their pool changed); and,
    from the namespace's other models (``siblings``, the model itself among them once it
    exists), an earlier model of the pool with the same Triton model name, and the
    pool's model count."""
    namespace = model.metadata.namespace or ""
    pool_name = pool.metadata.name
    reasons = refusals(pool, model, namespace_labels)
    if reasons:
        if not admits(pool, namespace, namespace_labels):
            return (
                "NamespaceNotAdmitted",
                f"{reasons[0]}; ask the pool's admin to add it to spec.tenants.",
            )
        return "QuotaExceeded", "; ".join(reasons) + "."
    # In creation order, then by name: the order unique_routes gives the gateway.
    same_pool = sorted(
        (
            (m["metadata"].get("creationTimestamp") or "", m["metadata"]["name"], m)
            for m in siblings
            if (m.get("spec") or {}).get("pool") == pool_name
        ),
        key=lambda entry: entry[:2],
    )
    triton_name = model.spec.model.name
    first = next(
        (
            name
            for _, name, m in same_pool
            if ((m.get("spec") or {}).get("model") or {}).get("name") == triton_name
        ),
        model.metadata.name,
    )
    if first != model.metadata.name and pool.spec.gateway.enabled:
        # The pool's gateway routes /v2/models/<Triton name> of a namespace to one model:
        # the earliest, as render.gateway_plan.unique_routes picks it. (Without a
        # gateway, each is reached at its own Service.)
        return (
            "ModelNameTaken",
            f"InferenceModel {first!r} in this namespace already serves Triton model "
            f"{triton_name!r} through TenantPool {pool_name!r}'s gateway "
            f"(/v2/models/{triton_name}); give this one another spec.model.name, or "
            "another pool.",
        )
    limit = pool.spec.quota.models
    if limit is not None:
        names = [name for _, name, _ in same_pool]
        rank = names.index(model.metadata.name) if model.metadata.name in names else len(names)
        if rank >= limit:
            return (
                "QuotaExceeded",
                f"TenantPool {pool_name!r} allows {limit} model(s) per namespace; "
                f"{len(names)} exist here and this one came later.",
            )
    return None


def _resolve(
    op: Operator, model: InferenceModel
) -> tuple[TenantPool, BatchPolicy | None] | Outcome:
    """The model's pool and BatchPolicy, or why it cannot be served."""
    namespace = model.metadata.namespace or ""
    pool_body = op.cache.get("TenantPool", model.spec.pool)
    if pool_body is None:
        return waiting(
            "TenantPoolNotFound",
            f"TenantPool {model.spec.pool!r} does not exist; the model will be deployed "
            "when it is created.",
        )
    try:
        pool = parse_object(TenantPool, pool_body)
    except ValidationError as exc:
        return stalled(
            "InvalidTenantPool",
            invalid_message(f"TenantPool {model.spec.pool!r}", exc, one_line=True),
        )
    ns = op.cache.get("Namespace", namespace) or {}
    labels = dict((ns.get("metadata") or {}).get("labels") or {})
    siblings = op.cache.all("InferenceModel", [namespace])
    refusal = admission_refusal(model, pool, labels, siblings)
    if refusal is not None:
        return stalled(*refusal)
    if model.spec.batch_policy is None:
        return pool, None
    name = model.spec.batch_policy.name
    body = op.cache.get("BatchPolicy", name, namespace)
    if body is None:
        return waiting(
            "BatchPolicyNotFound",
            f"BatchPolicy {namespace}/{name} does not exist; the model will be deployed "
            "when it is created.",
        )
    try:
        return pool, parse_object(BatchPolicy, body)
    except ValidationError as exc:
        return stalled(
            "InvalidBatchPolicy",
            invalid_message(f"BatchPolicy {namespace}/{name}", exc, one_line=True),
        )


def gather_facts(op: Operator, model: InferenceModel, pool: TenantPool) -> ModelFacts:
    """What the model's plan needs that only the cluster knows, from the cache and the
    operator's loops. Kueue is asked about only for a pool with elastic capacity, so
    models of other pools never wait on (or fail with) the discovery request."""
    elastic = pool.spec.capacity is not None
    found = op.predictions.get((model.metadata.namespace or "", model.metadata.name))
    return ModelFacts(
        now=dt.datetime.now(dt.UTC),
        kueue_served=elastic and op.kueue.served(op.kube),
        forecast_warm_pool=found.warm_pool if found else None,
        pool_members=_pool_members(op, model.spec.pool) if elastic else (),
        images=op.settings.serving_images,
    )


def _pool_members(op: Operator, pool: str) -> tuple[PoolMember, ...]:
    """The pool's served models (those with a Deployment), from the cache."""
    members = []
    for other in op.cache.in_pool(pool, ["InferenceModel"]):
        meta = other["metadata"]
        key = (meta.get("namespace") or "", meta["name"])
        deployment = op.cache.get("Deployment", key[1], key[0])
        if deployment is None:
            continue
        available = int((deployment.get("status") or {}).get("availableReplicas") or 0)
        members.append(PoolMember(key, other.get("spec") or {}, available))
    return tuple(members)


def _apply_failed(obj: dict[str, Any], exc: ApiError) -> Outcome:
    message = (
        f"Applying {obj['kind']} {obj['metadata']['name']} failed: "
        f"{exc.status} {exc.reason}: {api_message(exc)}"
    )
    if exc.status in TERMINAL_API_STATUSES:
        return stalled("ApplyFailed", message)
    raise exc  # transient: the pass is retried with backoff


def converge(op: Operator, model: InferenceModel) -> Outcome:
    """Apply the desired stack and observe its Deployment; never raises for bad input."""
    resolved = _resolve(op, model)
    if isinstance(resolved, Outcome):
        return resolved
    pool, policy = resolved
    facts = gather_facts(op, model, pool)
    try:
        plan = plan_model(model, pool, policy.spec if policy else None, facts)
    except PlanError as exc:
        return stalled(exc.reason, str(exc))
    op.predictions.set_ceiling(
        (model.metadata.namespace or "", model.metadata.name), plan.bounds.ceiling
    )
    # The namespace holds the pool's isolation before any of the model's pods can exist.
    namespace = model.metadata.namespace or ""
    with op.isolation_lock(pool.metadata.name, namespace):
        for obj in isolation_objects(op, pool, namespace):
            try:
                op.kube.apply(obj)
            except ApiError as exc:
                return _apply_failed(obj, exc)
    deployment: dict[str, Any] | None = None
    autoscaler: dict[str, Any] | None = None
    for obj in plan.objects:
        try:
            live = op.kube.apply(obj)
        except ApiError as exc:
            return _apply_failed(obj, exc)
        if obj["kind"] == "Deployment":
            deployment = live
        elif obj["kind"] == "HorizontalPodAutoscaler":
            autoscaler = live
    owner = model_owner(model)
    prune(
        op.kube,
        owner,
        op.cache.of_model(namespace, model.metadata.name, owner.kinds),
        keys(plan.objects),
    )
    assert deployment is not None  # the stack always has one
    outcome = replace(
        rollout_outcome(deployment, plan.bounds.floor),
        floor=plan.floor,
        bounds=plan.bounds,
        next_change=plan.next_change,
        max_batch_size=plan.batching.max_batch_size,
        autoscaler=autoscaler_condition(autoscaler),
        overflow=converge_overflow(op, model, plan.batching, pool),
    )
    if plan.parked:
        return scaled_to_zero(outcome, pool, model.spec.runtime.gpus, facts.now)
    rollout = deployment.get("status") or {}
    replicas = rollout.get("replicas", 0)
    # Where Kueue governs the pool, a replica may wait for quota while the model serves.
    waiting = plan.queue is not None and bool(rollout.get("unavailableReplicas"))
    if replicas and (
        outcome.ready.status != "True" or outcome.progressing.status == "True" or waiting
    ):
        pods = op.kube.list(
            "v1", "Pod", model.metadata.namespace, labels=f"{MODEL_LABEL}={model.metadata.name}"
        )
        outcome = with_replica_states(outcome, summarise(pods))
    return outcome


def model_owner(model: InferenceModel) -> Owner:
    """The model's own stack: labelled as the model's, and not as an overflow twin (a
    model may be named like another's twin)."""
    return Owner(MODEL, {MODEL_LABEL: model.metadata.name}, unmarked=(OVERFLOW_OF_LABEL,))


def scaled_to_zero(outcome: Outcome, pool: TenantPool, gpus: int, now: dt.datetime) -> Outcome:
    """The outcome of a model its pool's capacity window leaves no GPUs (pure): not
    Ready, for a planned reason, and its HPA idle (it does not scale a Deployment at
    zero), which is not a fault to warn about."""
    assert pool.spec.capacity is not None  # only a pool with capacity has windows
    nominal = nominal_at(pool.spec.capacity, now)
    where = f"capacity window {nominal.window}" if nominal.window else "capacity"
    message = (
        f"The pool's {where} gives it {nominal.gpus} GPUs, fewer than one replica needs "
        f"({gpus}): the model runs no replica until the pool has them again."
    )
    return replace(
        outcome,
        ready=Cond("Ready", "False", SCALED_TO_ZERO, message),
        autoscaler=Cond(AUTOSCALER_READY, "Unknown", SCALED_TO_ZERO, message),
    )


def with_replica_states(outcome: Outcome, load: ModelLoadState) -> Outcome:
    """The outcome told where the replicas are (pure): while none serves, Ready says
    why in the most telling replica's words (Fetching, Loading, FailedToLoad with
    Triton's message, Unschedulable with the scheduler's, ...); a replica that failed
    marks the model Degraded, and Stalled while none serves."""
    headline = load.headline
    if headline is None:
        return outcome
    changes: dict[str, Any] = {"replica_states": load.counts}
    summary = ", ".join(f"{n} {state}" for state, n in load.counts.items())
    if outcome.ready.status != "True" and headline.state != READY:
        changes["ready"] = Cond("Ready", "False", headline.state, f"{summary}. {headline.message}")
        changes["stalled"] = load.failed
    if load.failed:
        changes["degraded"] = Cond("Degraded", "True", headline.state, headline.message)
    return replace(outcome, **changes)


METRIC_FIELDS = (
    "queueDepth",
    "p95Latency",
    "averageBatchSize",
    "requestRate",
    "p99Latency",
    "meanQueueTime",
    "gpuUtilization",
    "gpuMemory",
    "gpuSecondsPer1kRequests",
    # From the predictive loop (shoal.autoscale), for models with scaling.predictive.
    "forecastRate",
    "capacityPerReplica",
    "requiredReplicas",
    "coldStart",
)


def model_status(
    model: InferenceModel | None,
    body: dict[str, Any],
    outcome: Outcome,
    metrics: tuple[dict[str, Any], Cond] | None = None,
    gateway: str | None = None,
) -> dict[str, Any]:
    """The model's whole status (pure): conditions, replicas, endpoints (through the
    pool's gateway at ``gateway``, a host, when it has one), the warm pool, and the
    figures from Prometheus (``metrics``; None keeps those already in status). A model
    that cannot be served reports why, and nothing else."""
    live = body.get("status") or {}
    conditions = [outcome.ready, outcome.progressing, outcome.degraded]
    conditions += kstatus(
        outcome.ready,
        stalled=outcome.stalled,
        progressing=outcome.progressing,
        settled=outcome.ready.reason == SCALED_TO_ZERO,
    )
    if outcome.autoscaler is not None:
        conditions.append(outcome.autoscaler)
    fields: dict[str, Any] = {}
    if outcome.overflow is not None:
        conditions.append(outcome.overflow.condition)
        fields["overflow"] = outcome.overflow.status
    elif model is not None and model.spec.overflow is not None and outcome.deployment is None:
        # A pass that stopped before the overflow (the model blocked): its overflow
        # replicas run on as they were, and the status keeps saying so.
        kept = condition(live, OVERFLOW_READY)
        if kept is not None:
            conditions.append(
                Cond(OVERFLOW_READY, kept["status"], kept["reason"], kept.get("message", ""))
            )
        fields["overflow"] = live.get("overflow")
    if outcome.deployment is not None and model is not None:
        if metrics is not None:
            fields.update({key: metrics[0].get(key) for key in METRIC_FIELDS})
            conditions.append(metrics[1])
        else:
            fields.update({key: live.get(key) for key in METRIC_FIELDS})
            kept = condition(live, "MetricsAvailable")
            if kept is not None:
                conditions.append(
                    Cond(
                        "MetricsAvailable", kept["status"], kept["reason"], kept.get("message", "")
                    )
                )
        average = fields.get("averageBatchSize")
        if average is not None and outcome.max_batch_size:
            fields["batchFill"] = round(min(average / outcome.max_batch_size, 1.0), 2)
        dstatus = outcome.deployment.get("status") or {}
        fields["replicas"] = dstatus.get("replicas", 0)
        fields["readyReplicas"] = dstatus.get("readyReplicas", 0)
        fields["replicaStates"] = outcome.replica_states
        host = f"{model.metadata.name}.{model.metadata.namespace}.svc"
        endpoints = {"http": f"http://{host}:{HTTP_PORT}", "grpc": f"{host}:{GRPC_PORT}"}
        if gateway is not None:
            endpoints["gateway"] = f"http://{gateway}:{HTTP_PORT}/v2/models/{model.spec.model.name}"
            endpoints["gatewayGrpc"] = f"{gateway}:{GRPC_PORT}"
        fields["endpoints"] = endpoints
    if outcome.floor is not None:
        bounds = outcome.bounds
        fields["warmPool"] = bounds.floor if bounds else outcome.floor.min_replicas
        fields["openSchedules"] = list(outcome.floor.open_windows)
    return assemble(body, conditions, **fields)


def reconcile_model(op: Operator, namespace: str, name: str) -> None:
    """One level-triggered pass over an InferenceModel. Safe to call at any time.

    Figures are read from Prometheus on the periodic pass (or the model's first), not on
    every event: they change all the time, and writing them on every event would feed
    the next event."""
    refresh = op.take_refresh(namespace, name)
    body = op.cache.get("InferenceModel", name, namespace) or op.kube.get(
        API_VERSION, "InferenceModel", name, namespace
    )
    if body is None or body["metadata"].get("deletionTimestamp"):
        op.set_wakeup("InferenceModel", name, None, namespace)
        op.model_gauges.forget(namespace, name)
        op.predictions.forget((namespace, name))
        return
    model: InferenceModel | None = None
    try:
        model = parse_object(InferenceModel, body)
    except ValidationError as exc:  # only an object stored under an older schema
        outcome = stalled("InvalidSpec", invalid_message("The spec", exc, one_line=True))
    else:
        outcome = converge(op, model)
    metrics = None
    if outcome.deployment is not None:
        if op.metrics is None:
            metrics = metrics_status(None)
        elif refresh or condition(body.get("status"), "MetricsAvailable") is None:
            metrics = metrics_status(op.metrics.figures(namespace, name))
            prediction = op.predictions.get((namespace, name))
            predictive = model.spec.scaling.predictive if model is not None else None
            if prediction is not None and predictive is not None and predictive.enabled:
                metrics[0].update(prediction.status())
    before = condition(body.get("status"), "Ready")
    autoscaler_before = condition(body.get("status"), AUTOSCALER_READY)
    replicas_before = (body.get("status") or {}).get("replicas")
    new = model_status(model, body, outcome, metrics, _gateway_host(op, model))
    target = model.spec.scaling.target_p95_latency if model is not None else None
    op.model_gauges.publish(
        namespace, name, new.get("conditions", []), parse_duration(target) if target else None
    )
    if write_status(op.kube, op.cache, body, new):
        _announce(op, body, before, outcome.ready)
        if outcome.autoscaler is not None:
            _announce_autoscaler(op, body, autoscaler_before, outcome.autoscaler)
    op.set_wakeup("InferenceModel", name, outcome.next_change, namespace)
    if new.get("replicas") != replicas_before and model is not None:
        # Its GPU use changed: the pool's usage, gathered over a burst of models.
        op.request_pool(model.spec.pool, delay=POOL_GATHER_SECONDS)


def _gateway_host(op: Operator, model: InferenceModel | None) -> str | None:
    """The host of the model's pool's gateway, if the pool has one."""
    if model is None:
        return None
    pool = op.cache.get("TenantPool", model.spec.pool)
    gateway = ((pool or {}).get("spec") or {}).get("gateway") or {}
    if pool is None or gateway.get("enabled") is False:
        return None
    return gateway_host(model.spec.pool, op.settings.gateway)


def _announce_autoscaler(
    op: Operator, body: dict[str, Any], before: dict[str, Any] | None, now: Cond
) -> None:
    """A Warning when the HPA cannot read its metrics, and a Normal Event when it can
    again (not when a new model's HPA reads them for the first time)."""
    was = (before or {}).get("status")
    if now.status == was or now.status == "Unknown":
        return
    if now.status == "True" and was != "False":
        return
    op.kube.event(body, "Normal" if now.status == "True" else "Warning", now.reason, now.message)


def _announce(
    op: Operator, body: dict[str, Any], before: dict[str, Any] | None, ready: Cond
) -> None:
    """An Event when readiness changes (not for a new model that is just starting)."""
    if before is None and ready.reason in ON_THE_WAY:
        return
    if before is not None and (before.get("status"), before.get("reason")) == (
        ready.status,
        ready.reason,
    ):
        return
    planned = ready.reason in ON_THE_WAY or ready.reason == SCALED_TO_ZERO
    type_ = "Normal" if ready.status == "True" or planned else "Warning"
    op.kube.event(body, type_, ready.reason, ready.message)
