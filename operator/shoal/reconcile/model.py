"""Reconciling one InferenceModel into its Triton serving stack."""

from __future__ import annotations

import datetime as dt
import json
import logging
from dataclasses import dataclass, replace
from typing import Any

from pydantic import ValidationError

from shoal.api.admission import admits
from shoal.api.batchpolicy import BatchPolicy
from shoal.api.common import parse_object
from shoal.api.inferencemodel import InferenceModel
from shoal.api.tenantpool import TenantPool
from shoal.kube.client import ApiError, Kube
from shoal.reconcile.conditions import (
    Cond,
    condition,
    merge_conditions,
    now_rfc3339,
    status_differs,
)
from shoal.render.desired import model_objects
from shoal.render.names import GRPC_PORT, HTTP_PORT, MODEL_LABEL
from shoal.render.schedule import Floor, floor_at, next_change

log = logging.getLogger(__name__)
GROUP_VERSION = "shoal.dev/v1alpha1"


@dataclass(frozen=True)
class Outcome:
    """What a reconcile found: the conditions to report and the Deployment it saw."""

    ready: Cond
    progressing: Cond
    degraded: Cond
    deployment: dict[str, Any] | None = None
    floor: Floor | None = None
    next_change: dt.datetime | None = None  # when a scheduled window opens or closes


def _blocked(reason: str, message: str) -> Outcome:
    """The model cannot be rendered: nothing is applied, the reason is reported."""
    return Outcome(
        ready=Cond("Ready", "False", reason, message),
        progressing=Cond("Progressing", "False", reason, message),
        degraded=Cond("Degraded", "True", reason, message),
    )


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
        degraded = Cond("Degraded", "True", "ReplicaFailure", failure.get("message", ""))
    elif progress and progress.get("reason") == "ProgressDeadlineExceeded":
        degraded = Cond("Degraded", "True", "ProgressDeadlineExceeded", progress.get("message", ""))
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
    return Outcome(ready, progressing, degraded, deployment)


def _resolve(
    kube: Kube, model: InferenceModel
) -> tuple[TenantPool | None, BatchPolicy | None, Outcome | None]:
    namespace = model.metadata.namespace
    pool_body = kube.get(GROUP_VERSION, "TenantPool", model.spec.pool)
    if pool_body is None:
        return (
            None,
            None,
            _blocked(
                "TenantPoolNotFound",
                f"TenantPool {model.spec.pool!r} does not exist; the model will be deployed "
                "when it is created.",
            ),
        )
    pool = parse_object(TenantPool, pool_body)
    refusal = admission_refusal(kube, model, pool)
    if refusal is not None:
        return pool, None, _blocked(*refusal)
    policy = None
    if model.spec.batch_policy:
        name = model.spec.batch_policy.name
        body = kube.get(GROUP_VERSION, "BatchPolicy", name, namespace)
        if body is None:
            return (
                pool,
                None,
                _blocked(
                    "BatchPolicyNotFound",
                    f"BatchPolicy {namespace}/{name} does not exist; the model will be deployed "
                    "when it is created.",
                ),
            )
        policy = parse_object(BatchPolicy, body)
    return pool, policy, None


def admission_refusal(
    kube: Kube, model: InferenceModel, pool: TenantPool
) -> tuple[str, str] | None:
    """Why the pool refuses the model, if it does: namespace not admitted, or quota."""
    namespace = model.metadata.namespace or ""
    ns = kube.get("v1", "Namespace", namespace) or {}
    labels = (ns.get("metadata") or {}).get("labels") or {}
    pool_name = pool.metadata.name
    if not admits(pool, namespace, labels):
        return (
            "NamespaceNotAdmitted",
            f"TenantPool {pool_name!r} does not admit namespace {namespace!r}; "
            "ask its admin to add it to spec.tenants.",
        )
    quota = pool.spec.quota
    warm_gpus = model.spec.scaling.min_replicas * model.spec.runtime.gpus
    if warm_gpus > quota.gpus:
        return (
            "QuotaExceeded",
            f"The warm pool needs {warm_gpus} GPUs ({model.spec.scaling.min_replicas} replicas "
            f"x {model.spec.runtime.gpus}); TenantPool {pool_name!r} allows {quota.gpus} "
            "per namespace.",
        )
    if quota.models is not None:
        siblings = sorted(
            (m["metadata"].get("creationTimestamp", ""), m["metadata"]["name"])
            for m in kube.list(GROUP_VERSION, "InferenceModel", namespace)
            if (m.get("spec") or {}).get("pool") == pool_name
        )
        rank = (
            [name for _, name in siblings].index(model.metadata.name)
            if any(name == model.metadata.name for _, name in siblings)
            else len(siblings)
        )
        if rank >= quota.models:
            return (
                "QuotaExceeded",
                f"TenantPool {pool_name!r} allows {quota.models} model(s) per namespace; "
                f"{len(siblings)} exist here and this one came later.",
            )
    return None


def converge(kube: Kube, model: InferenceModel) -> Outcome:
    """Apply the desired stack and observe its Deployment; never raises for bad input."""
    pool, policy, blocked = _resolve(kube, model)
    if blocked is not None or pool is None:
        assert blocked is not None
        return blocked
    floor = floor_at(model.spec.scaling, dt.datetime.now(dt.UTC))
    try:
        desired = model_objects(model, policy.spec if policy else None, pool, floor.min_replicas)
    except ValueError as exc:
        return _blocked("InvalidBatching", f"The model's batchPolicy overrides do not fit: {exc}")
    deployment: dict[str, Any] | None = None
    for obj in desired:
        try:
            live = kube.apply(obj)
        except ApiError as exc:
            return _blocked(
                "ApplyFailed",
                f"Applying {obj['kind']} {obj['metadata']['name']} failed: "
                f"{exc.status} {exc.reason}: {_api_message(exc)}",
            )
        if obj["kind"] == "Deployment":
            deployment = live
    # The stack always has one, and a Deployment is always read (its status is needed).
    assert deployment is not None
    outcome = replace(
        rollout_outcome(deployment, floor.min_replicas),
        floor=floor,
        next_change=next_change(model.spec.scaling, dt.datetime.now(dt.UTC)),
    )
    if outcome.ready.status != "True":
        pods = kube.list(
            "v1", "Pod", model.metadata.namespace, labels=f"{MODEL_LABEL}={model.metadata.name}"
        )
        reason = pod_problem(pods)
        if reason is not None:
            outcome = replace(outcome, ready=Cond("Ready", "False", *reason))
    return outcome


def pod_problem(pods: list[dict[str, Any]]) -> tuple[str, str] | None:
    """Why the model's pods are not ready, in the scheduler's or kubelet's words (pure)."""
    for pod in pods:
        status = pod.get("status") or {}
        for cond in status.get("conditions") or []:
            if cond.get("type") == "PodScheduled" and cond.get("status") == "False":
                return "Unschedulable", f"Pod {pod['metadata']['name']}: {cond.get('message', '')}"
        for container in (status.get("initContainerStatuses") or []) + (
            status.get("containerStatuses") or []
        ):
            waiting = (container.get("state") or {}).get("waiting") or {}
            if waiting.get("reason") in (
                "CrashLoopBackOff",
                "ImagePullBackOff",
                "ErrImagePull",
                "CreateContainerConfigError",
                "InvalidImageName",
            ):
                return waiting["reason"], (
                    f"Pod {pod['metadata']['name']} container {container.get('name')}: "
                    f"{waiting.get('message', waiting['reason'])}"
                )
    return None


def _api_message(exc: ApiError) -> str:
    try:
        return str(json.loads(exc.body or "").get("message", exc.body))
    except (TypeError, ValueError):
        return str(exc.body)


METRIC_FIELDS = ("queueDepth", "p95Latency", "averageBatchSize", "requestRate")


def desired_status(
    model: InferenceModel,
    body: dict[str, Any],
    outcome: Outcome,
    metrics: tuple[dict[str, Any], Cond] | None = None,
) -> dict[str, Any]:
    """The status to write (pure): conditions, replicas, endpoints, and the figures
    from Prometheus (``metrics``; None keeps the figures already in status)."""
    live = body.get("status") or {}
    generation = model.metadata.generation
    conditions = [outcome.ready, outcome.progressing, outcome.degraded]
    figures: dict[str, Any] = {}
    if metrics is not None:
        figures = {key: metrics[0].get(key) for key in METRIC_FIELDS}  # None clears
        conditions.append(metrics[1])
    else:
        figures = {key: live[key] for key in METRIC_FIELDS if key in live}
        kept = condition(live, "MetricsAvailable")
        if kept is not None:
            conditions.append(
                Cond("MetricsAvailable", kept["status"], kept["reason"], kept.get("message", ""))
            )
    status: dict[str, Any] = {
        "observedGeneration": generation,
        "conditions": merge_conditions(
            live.get("conditions", []), conditions, generation, now_rfc3339()
        ),
        **figures,
    }
    if outcome.deployment is not None:
        dstatus = outcome.deployment.get("status") or {}
        status["replicas"] = dstatus.get("replicas", 0)
        status["readyReplicas"] = dstatus.get("readyReplicas", 0)
        host = f"{model.metadata.name}.{model.metadata.namespace}.svc"
        status["endpoints"] = {"http": f"http://{host}:{HTTP_PORT}", "grpc": f"{host}:{GRPC_PORT}"}
    if outcome.floor is not None:
        status["warmPool"] = outcome.floor.min_replicas
        status["openSchedules"] = list(outcome.floor.open_windows)
    return status


def reconcile_model(
    kube: Kube, body: dict[str, Any], metrics: tuple[dict[str, Any], Cond] | None = None
) -> Outcome:
    """One level-triggered pass over an InferenceModel. Safe to call at any time."""
    live = body.get("status") or {}
    try:
        model = parse_object(InferenceModel, body)
    except ValidationError as exc:
        # Only an object stored under an older schema can get here.
        outcome = _blocked("InvalidSpec", str(exc))
        generation = (body.get("metadata") or {}).get("generation")
        conditions = [outcome.ready, outcome.progressing, outcome.degraded]
        new_status: dict[str, Any] = {
            "conditions": merge_conditions(
                live.get("conditions", []), conditions, generation, now_rfc3339()
            )
        }
    else:
        outcome = converge(kube, model)
        new_status = desired_status(model, body, outcome, metrics)
    if status_differs(live, new_status):
        before = condition(live, "Ready")
        kube.patch_status(body, new_status)
        _announce(kube, body, before, outcome.ready)
    return outcome


def _announce(kube: Kube, body: dict[str, Any], before: dict[str, Any] | None, ready: Cond) -> None:
    """An Event when readiness changes, or its reason does."""
    if (
        before is not None
        and before.get("status") == ready.status
        and before.get("reason") == ready.reason
    ):
        return
    type_ = (
        "Normal" if ready.status == "True" or ready.reason == "NoReplicasAvailable" else "Warning"
    )
    kube.event(body, type_, ready.reason, ready.message)
